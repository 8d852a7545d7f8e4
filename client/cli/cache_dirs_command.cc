#include "client/cli/cache_dirs_command.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/cache_dir_context.h"
#include "client/cli/output.h"
#include "client/launch/launch_command.h"
#include "engine/cache_dirs/cache_dir_key.h"
#include "engine/cache_dirs/cache_dir_table.h"

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
  absl::StatusOr<std::vector<CacheDirSpec>> specs = CacheDirSpecs(flags.user_dirs);
  if (!specs.ok()) return Fail(specs.status().message(), kExitBadInput);
  absl::StatusOr<KeyContext> keyed =
      KeyContextFor(launch::LauncherOptionsFromEnvironment().lookup, flags.arch);
  if (!keyed.ok()) return Fail(keyed.status().message(), kExitBadInput);
  const CacheDirContext& context = keyed->context;
  const std::string& sms_from = keyed->sms_from;

  json rows = json::array();
  Table table({"library", "version", "directory", "files", "size", "key"}, {3, 4});
  for (const CacheDirSpec& spec : *specs) {
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
                  "the SMs an image's build declares, comma-separated (7.5,8.6,9.0a): the key's "
                  "when no GPU is seen (a GPU seen is what the key names)");
  sub->add_option("--cache-dir", flags.user_dirs,
                  "a directory of your own, keyed as the table's: NAME=DIR[:PREFIX,...] (DIR "
                  "absolute; variables with a PREFIX are keyed); repeatable");
  sub->callback([exit_code] { *exit_code = Run(flags); });
}

}  // namespace kcache::cli
