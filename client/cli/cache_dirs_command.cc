#include "client/cli/cache_dirs_command.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/node_devices.h"
#include "client/cli/output.h"
#include "client/cli/run_environment.h"
#include "client/launch/launch_command.h"
#include "engine/cache_dirs/cache_dir_key.h"
#include "engine/cache_dirs/cache_dir_table.h"
#include "engine/cache_dirs/installed_versions.h"
#include "kcache/device.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;
using cache_dirs::CacheDirContext;
using cache_dirs::CacheDirKey;
using cache_dirs::CacheDirSpec;
using json = nlohmann::json;

// A directory walk stops counting here: the listing is a summary, not a capture.
constexpr uint64_t kMaxFilesCounted = 100000;

struct Contents {
  bool exists = false;
  uint64_t files = 0;  // regular files not left out, up to kMaxFilesCounted
  uint64_t bytes = 0;
  bool more = false;  // stopped at kMaxFilesCounted
};

Contents Walk(const CacheDirSpec& spec, const std::string& dir) {
  Contents contents;
  std::error_code ec;
  contents.exists = fs::is_directory(dir, ec);
  if (!contents.exists) return contents;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    std::string relative = fs::path(it->path()).lexically_relative(dir).string();
    if (cache_dirs::LeftOut(spec, relative)) continue;
    if (contents.files == kMaxFilesCounted) {
      contents.more = true;
      break;
    }
    ++contents.files;
    contents.bytes += it->file_size(ec);
  }
  return contents;
}

struct Flags {
  bool json_out = false;
  std::string arch;
  std::vector<std::string> user_dirs;
};

int Run(const Flags& flags) {
  std::vector<CacheDirSpec> specs = cache_dirs::KnownCacheDirs();
  if (specs.empty()) return Fail("kcache's cache directory table did not parse (a build defect)");
  for (const std::string& flag : flags.user_dirs) {
    absl::StatusOr<CacheDirSpec> mine = cache_dirs::ParseUserCacheDir(flag);
    if (!mine.ok()) return Fail(mine.status().message(), kExitBadInput);
    specs.push_back(*std::move(mine));
  }
  objects::ToolLookup lookup = launch::LauncherOptionsFromEnvironment().lookup;
  // The toolkit the process would compile with without kcache (not a kcache run's shim root).
  absl::StatusOr<std::string> toolkit_root = RealToolkitRoot(lookup);
  if (!toolkit_root.ok()) return Fail(toolkit_root.status().message(), kExitBadInput);
  CacheDirContext context;
  context.env = lookup.env;
  context.versions = cache_dirs::InstalledVersions(cache_dirs::SiteDirectories(context.env));
  if (!toolkit_root->empty()) context.toolkit = cache_dirs::ToolkitIdentity(*toolkit_root);
  std::string sms_from = "--arch";
  if (!flags.arch.empty()) {
    for (absl::string_view sm : absl::StrSplit(flags.arch, ',', absl::SkipEmpty())) {
      absl::StatusOr<client::Device> device = client::Device::Parse(sm);
      if (!device.ok()) {
        return Fail(absl::StrCat("--arch ", flags.arch, ": ", device.status().message()),
                    kExitBadInput);
      }
      context.sms.push_back(device->ToString());
    }
  } else if (absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
             gpus.ok()) {
    sms_from = "the GPUs seen";
    for (const client::GpuInfo& gpu : *gpus) context.sms.push_back(gpu.device.ToString());
  } else {
    sms_from = "none: no GPU seen and no --arch (an image's build declares its SMs with --arch)";
  }
  if (absl::StatusOr<uint32_t> driver = client::DriverVersion(); driver.ok()) {
    context.driver = std::to_string(*driver);
  }

  json rows = json::array();
  Table table({"library", "version", "directory", "files", "size", "key"}, {3, 4});
  for (const CacheDirSpec& spec : specs) {
    json row = {{"name", spec.name},
                {"user_added", spec.user_added},
                {"misses", spec.misses},
                {"served_by", spec.served_by},
                {"at_exit", spec.at_exit}};
    std::string version = cache_dirs::LibraryVersion(spec, context);
    row["version"] = version;
    absl::StatusOr<std::string> dir = cache_dirs::ResolveCacheDir(spec, context.env);
    if (!dir.ok()) {
      row["error"] = std::string(dir.status().message());
      rows.push_back(row);
      table.AddRow({spec.name, version.empty() ? "-" : version,
                    absl::StrCat("(", dir.status().message(), ")"), "-", "-", "-"});
      continue;
    }
    Contents contents = Walk(spec, *dir);
    CacheDirKey key = cache_dirs::KeyFor(spec, *dir, context);
    json components = json::object();
    for (const auto& [name, value] : key.components) components[name] = value;
    row["directory"] = *dir;
    row["exists"] = contents.exists;
    row["files"] = contents.files;
    row["files_more"] = contents.more;
    row["bytes"] = contents.bytes;
    row["key"] = key.digest;
    row["components"] = components;
    rows.push_back(row);
    table.AddRow({spec.name, version.empty() ? "-" : version, *dir,
                  contents.exists ? absl::StrCat(contents.files, contents.more ? "+" : "") : "-",
                  contents.exists ? HumanBytes(contents.bytes) : "-", key.digest.substr(0, 12)});
  }
  if (flags.json_out) {
    json out = {{"sms", context.sms},
                {"sms_from", sms_from},
                {"toolkit", context.toolkit},
                {"driver", context.driver},
                {"directories", rows}};
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s", table.Render().c_str());
  std::printf("SMs: %s (%s); toolkit %s; driver %s\n",
              context.sms.empty() ? "-" : absl::StrJoin(context.sms, ",").c_str(), sms_from.c_str(),
              context.toolkit.empty() ? "-" : context.toolkit.c_str(),
              context.driver.empty() ? "-" : context.driver.c_str());
  std::printf(
      "key: what each library's own key misses, and what kcache's adds: kcache cache-dirs "
      "--json, docs/cache-dirs.md\n");
  return kExitOk;
}

}  // namespace

void RegisterCacheDirsCommand(CLI::App& app, int* exit_code) {
  static Flags flags;
  CLI::App* sub = app.add_subcommand(
      "cache-dirs",
      "list the inference libraries' JIT cache directories (vLLM, Inductor, Triton, FlashInfer, "
      "DeepGEMM, SGLang, tvm-ffi, CuTe DSL, TileLang, Warp, CuPy, the driver's ComputeCache) as "
      "this environment has them: where each is, what it holds, and the key a snapshot of it "
      "has (docs/cache-dirs.md)");
  sub->add_flag("--json", flags.json_out, "print JSON: each directory with its key's components");
  sub->add_option("--arch", flags.arch,
                  "the SMs the key names, comma-separated (7.5,8.6,9.0a); default: the GPUs seen");
  sub->add_option("--cache-dir", flags.user_dirs,
                  "a directory of your own, keyed as the table's: NAME=DIR[:PREFIX,...] (DIR "
                  "absolute; variables with a PREFIX are keyed); repeatable");
  sub->callback([exit_code] { *exit_code = Run(flags); });
}

}  // namespace kcache::cli
