#include "client/cli/export_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/cli/object_remote.h"
#include "client/cli/output.h"
#include "engine/objects/object_export.h"

namespace kcache::cli {
namespace {

struct ExportFlags {
  std::string server;
  std::string to_store;
  std::vector<std::string> namespaces;
};

std::string Summary(const objects::ExportProgress& done) {
  std::vector<std::string> parts;
  for (const auto& [ns, count] : done.by_namespace) parts.push_back(absl::StrCat(count, " ", ns));
  return absl::StrCat(done.exported, " objects (", absl::StrJoin(parts, ", "), "), ",
                      HumanBytes(done.bytes));
}

int Export(const ExportFlags& flags) {
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenStoreForCli(flags.to_store, StoreUse::kCreateOrWrite);
  if (!store.ok()) {
    return Fail(absl::StrCat("--to-store ", flags.to_store, ": ", store.status().message(),
                             " (it must be a directory this user can write and no running "
                             "kcached holds: export into a new one)"),
                kExitBadInput);
  }
  absl::StatusOr<std::unique_ptr<objects::ObjectCache>> server =
      OpenRemoteObjectCache(flags.server);
  if (!server.ok()) return Fail(server.status().message());
  objects::ExportOptions options;
  options.namespaces = flags.namespaces;
  auto last = std::chrono::steady_clock::now();
  auto progress = [&last](const objects::ExportProgress& done) {
    auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(1)) return;
    last = now;
    std::fprintf(stderr, "kcache export: %s so far, %llu listed\n", Summary(done).c_str(),
                 static_cast<unsigned long long>(done.listed));
  };
  absl::StatusOr<objects::ExportProgress> done =
      objects::ExportObjects(**server, **store, options, progress);
  if (!done.ok()) return Fail(done.status().message());
  if (done->refused + done->gone > 0) {
    std::fprintf(stderr, "kcache export: %llu entries did not verify, %llu were gone: skipped\n",
                 static_cast<unsigned long long>(done->refused),
                 static_cast<unsigned long long>(done->gone));
  }
  if (done->exported == 0) {
    return Fail(absl::StrCat(
        "kcached at ", flags.server, " has no client-made objects",
        flags.namespaces.empty() ? "" : absl::StrCat(" in ", absl::StrJoin(flags.namespaces, ",")),
        " (", done->listed,
        " listed): nothing exported. Objects are client-made when a launcher "
        "(kcache run --server) or the Redis door stored them in this kcached"));
  }
  std::printf("exported %s into %s\n", Summary(*done).c_str(), flags.to_store.c_str());
  return kExitOk;
}

// Export, and a failed export leaves no store it created (a daemon out of reach, nothing to
// export): an empty store would bake into the next image as if it held something.
int RunExport(const ExportFlags& flags) {
  std::error_code ec;
  bool existed = std::filesystem::exists(flags.to_store, ec) || ec;
  int exit_code = Export(flags);  // the store is closed when it returns
  if (exit_code != kExitOk && !existed) std::filesystem::remove_all(flags.to_store, ec);
  return exit_code;
}

}  // namespace

void RegisterExportCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Copy a running kcached's client-made objects (compiler launchers' outputs, Redis-door\n"
      "values) into a store directory, for the next image to bake (--baked)");
  cmd->add_option("--server", flags->server, "kcached address, e.g. unix:///run/kcache/kcache.sock")
      ->required();
  cmd->add_option("--to-store", flags->to_store, "Store directory to write (created if missing)")
      ->required();
  cmd->add_option("--namespace", flags->namespaces,
                  "Only these (repeatable): objects (the launchers'), pt2, triton, ...");
  cmd->callback([flags, exit_code] { *exit_code = RunExport(*flags); });
}

}  // namespace kcache::cli
