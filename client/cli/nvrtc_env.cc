#include "client/cli/nvrtc_env.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/compiler_shims.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

bool IsFile(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_regular_file(path, ec);
}

// LD_PRELOAD's entries (the dynamic loader splits it at colons and spaces).
std::vector<std::string> PreloadEntries(const std::string& preload) {
  return absl::StrSplit(preload, absl::ByAnyChar(": "), absl::SkipEmpty());
}

}  // namespace

NvrtcRouting RouteNvrtc(const objects::Environment& env, const std::string& stand_in,
                        const std::string& toolkit_root, bool enabled) {
  NvrtcRouting routing;
  std::string preload = Variable(env, "LD_PRELOAD");
  std::vector<std::string> entries = PreloadEntries(preload);
  std::vector<std::string> others;
  for (const std::string& entry : entries) {
    if (!SameFile(entry, stand_in)) others.push_back(entry);
  }
  bool preloaded = others.size() != entries.size();
  if (!enabled) {
    if (preloaded) routing.env.emplace_back("LD_PRELOAD", absl::StrJoin(others, ":"));
    return routing;
  }
  if (stand_in.empty()) {
    routing.notes.push_back(
        "kcache's NVRTC stand-in (nvrtc/libnvrtc.so.13 beside libkcache-observe.so) is not "
        "installed: NVRTC in the command is the real one, not routed through kcache");
    return routing;
  }

  std::string real;
  std::string had = Variable(env, "KCACHE_REAL_NVRTC");
  if (!had.empty()) {
    if (IsFile(had) && !SameFile(had, stand_in)) {
      real = had;
    } else {
      routing.notes.push_back(absl::StrCat("$KCACHE_REAL_NVRTC (", had, ") is not kept: ",
                                           IsFile(had) ? "it is kcache's stand-in" : "no such file",
                                           "; the toolkit's NVRTC is taken instead"));
    }
  }
  if (real.empty() && !toolkit_root.empty()) {
    std::string candidate = absl::StrCat(toolkit_root, "/lib64/libnvrtc.so.13");
    if (IsFile(candidate) && !SameFile(candidate, stand_in)) real = candidate;
  }
  if (real.empty()) {
    routing.notes.push_back(absl::StrCat(
        "no real NVRTC (", toolkit_root.empty() ? "no CUDA toolkit" : toolkit_root + "/lib64",
        " has no libnvrtc.so.13; set KCACHE_REAL_NVRTC to one): kcache's NVRTC stand-in is not "
        "preloaded"));
    return routing;
  }
  if (!preloaded) {
    routing.env.emplace_back("LD_PRELOAD",
                             preload.empty() ? stand_in : absl::StrCat(preload, ":", stand_in));
  }
  routing.env.emplace_back("KCACHE_REAL_NVRTC", real);
  return routing;
}

}  // namespace kcache::cli
