#include "client/cli/commands.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/cli/cache_dirs_command.h"
#include "client/cli/doctor.h"
#include "client/cli/export_command.h"
#include "client/cli/launcher_commands.h"
#include "client/cli/output.h"
#include "client/cli/ptx_build_command.h"
#include "client/cli/server_commands.h"

namespace kcache::cli {

absl::StatusOr<std::unique_ptr<Store>> OpenStoreForCli(const std::string& path, StoreUse use) {
  if (path.empty()) {
    return absl::InvalidArgumentError("no store given; pass --store DIR");
  }
  StoreOptions options;
  options.read_only = use == StoreUse::kRead;
  options.create_if_missing = use == StoreUse::kCreateOrWrite;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path, options);
  if (absl::IsNotFound(store.status())) {  // absent or empty: nothing to read
    std::error_code ec;
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a kcache store (",
                     std::filesystem::exists(path, ec) ? "an empty directory" : "no such directory",
                     "); make one with `kcache warm --store ", path, " MANIFEST`"));
  }
  return store;
}

absl::StatusOr<std::shared_ptr<const Toolkit>> LoadToolkitForCli(const std::string& root) {
  return Toolkit::Load(root.empty() ? Toolkit::DefaultRoot() : root);
}

int RunCli(int argc, char** argv) {
  if (IsLauncherInvocation(argc, argv)) return RunLauncherCli(argc, argv);
  CLI::App app{
      "kcache: an ahead-of-time compilation cache for CUDA kernels.\n"
      "Warm a store with compiled kernels for whole architecture lists, inspect it, and\n"
      "fetch the artifact a device would be served; with --server ADDR, the same through a\n"
      "running kcached. See README.md and docs/."};
  app.name("kcache");
  app.set_version_flag("--version", "kcache 0.1.0");
  app.require_subcommand(1);
  app.fallthrough();
  int exit_code = kExitOk;
  RegisterWarmCommand(app, &exit_code);
  RegisterBakeManifestCommand(app, &exit_code);
  RegisterStoreCommands(app, &exit_code);
  RegisterServerCommands(app, &exit_code);
  RegisterDoctorCommand(app, &exit_code);
  RegisterLauncherCommands(app, &exit_code);
  RegisterExportCommand(app, &exit_code);
  RegisterPtxBuildCommand(app, &exit_code);
  RegisterCacheDirsCommand(app, &exit_code);
  try {
    app.parse(ArgsForParse(argc, argv));
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  return exit_code;
}

}  // namespace kcache::cli
