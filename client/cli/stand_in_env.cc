#include "client/cli/stand_in_env.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/compiler_shims.h"
#include "client/cli/elf_functions.h"
#include "client/stand_in/loader_search.h"

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

StandInRouting RouteStandIn(const objects::Environment& env, const StandIn& stand_in,
                            bool enabled) {
  StandInRouting routing;
  std::string preload = Variable(env, "LD_PRELOAD");
  std::vector<std::string> entries = PreloadEntries(preload);
  std::vector<std::string> others;
  for (const std::string& entry : entries) {
    if (!SameFile(entry, stand_in.library)) others.push_back(entry);
  }
  bool preloaded = others.size() != entries.size();
  if (!enabled) {
    if (preloaded) routing.env.emplace_back("LD_PRELOAD", absl::StrJoin(others, ":"));
    routing.start = StandInStart::kOff;
    return routing;
  }
  std::string had = Variable(env, stand_in.real_variable);
  if (stand_in.library.empty()) {
    if (!had.empty() || !stand_in.found.empty()) {
      routing.notes.push_back(absl::StrCat("kcache's ", stand_in.name,
                                           " is not installed: the real library is not routed "
                                           "through kcache"));
    }
    return routing;
  }

  if (stand_in.only_where_found && stand_in.found.empty()) {
    if (!had.empty()) {
      routing.notes.push_back(absl::StrCat("$", stand_in.real_variable, " (", had,
                                           ") is not used: nothing loads here without "
                                           "kcache, so kcache's ",
                                           stand_in.name,
                                           " is not preloaded (a process sees what it "
                                           "would see without kcache)"));
    }
    return routing;
  }
  std::string real;
  if (!had.empty()) {
    if (IsFile(had) && !SameFile(had, stand_in.library)) {
      real = had;
    } else {
      routing.notes.push_back(
          absl::StrCat("$", stand_in.real_variable, " (", had,
                       ") is not kept: ", IsFile(had) ? "it is kcache's stand-in" : "no such file",
                       "; the one found here is taken instead"));
    }
  }
  if (real.empty() && IsFile(stand_in.found) && !SameFile(stand_in.found, stand_in.library)) {
    real = stand_in.found;
  }
  if (!real.empty() && stand_in.refuse) {
    if (std::string why = stand_in.refuse(real); !why.empty()) {
      if (preloaded) routing.env.emplace_back("LD_PRELOAD", absl::StrJoin(others, ":"));
      routing.notes.push_back(std::move(why));
      routing.start = StandInStart::kRefused;
      return routing;
    }
  }
  if (real.empty()) {
    if (!stand_in.not_found.empty()) {
      routing.notes.push_back(
          absl::StrCat(stand_in.not_found, ": kcache's ", stand_in.name, " is not preloaded"));
    }
    return routing;
  }
  if (!preloaded) {
    routing.env.emplace_back("LD_PRELOAD", preload.empty()
                                               ? stand_in.library
                                               : absl::StrCat(preload, ":", stand_in.library));
  }
  if (!stand_in.per_process || real == had) {  // per process: only the environment's, kept
    routing.env.emplace_back(stand_in.real_variable, real);
  }
  routing.start = StandInStart::kPreloaded;
  return routing;
}

StandInRouting RouteNvrtc(const objects::Environment& env, const std::string& stand_in,
                          const std::string& found, bool enabled) {
  StandIn nvrtc;
  nvrtc.name = "NVRTC stand-in (nvrtc/libnvrtc.so.13 beside libkcache-observe.so)";
  nvrtc.library = stand_in;
  nvrtc.real_variable = "KCACHE_REAL_NVRTC";
  nvrtc.found = found;
  nvrtc.not_found =
      "no real NVRTC (no libnvrtc.so.13 where this environment's processes would load one, nor "
      "in a CUDA toolkit; set KCACHE_REAL_NVRTC to one)";
  nvrtc.per_process = true;
  return RouteStandIn(env, nvrtc, enabled);
}

StandInRouting RouteNvrtc12(const objects::Environment& env, const std::string& stand_in,
                            const std::string& found, bool enabled) {
  StandIn nvrtc;
  nvrtc.name = "NVRTC 12 stand-in (nvrtc/libnvrtc.so.12 beside libkcache-observe.so)";
  nvrtc.library = stand_in;
  nvrtc.real_variable = "KCACHE_REAL_NVRTC_12";
  nvrtc.found = found;
  nvrtc.per_process = true;
  return RouteStandIn(env, nvrtc, enabled);
}

std::string FindNvrtc(int major, const objects::ToolLookup& lookup,
                      const std::string& toolkit_root) {
  std::string python = FindProgram("python3", lookup);
  if (python.empty()) python = FindProgram("python", lookup);
  auto search = std::make_unique<KcacheSearch>();  // ~200 KiB
  search->count = 0;
  const char* roots[] = {toolkit_root.empty() ? nullptr : toolkit_root.c_str()};
  KcacheSearchNvrtc(search.get(), major, nullptr, python.empty() ? nullptr : python.c_str(), roots,
                    1);
  for (size_t i = 0; i < search->count; ++i) {
    if (IsFile(search->paths[i])) return search->paths[i];
  }
  return "";
}

namespace {

// The driver API functions (cu[A-Z]...) `driver` exports that `stand_in` does not.
absl::StatusOr<std::vector<std::string>> FunctionsNotStoodIn(const std::string& driver,
                                                             const std::string& stand_in) {
  absl::StatusOr<std::set<std::string>> real = DynamicFunctions(driver);
  if (!real.ok()) return real.status();
  absl::StatusOr<std::set<std::string>> ours = DynamicFunctions(stand_in);
  if (!ours.ok()) return ours.status();
  std::vector<std::string> missing;
  for (const std::string& name : *real) {
    bool api = name.size() > 2 && name.compare(0, 2, "cu") == 0 &&
               absl::ascii_isupper(static_cast<unsigned char>(name[2]));
    if (api && !ours->contains(name)) missing.push_back(name);
  }
  return missing;
}

}  // namespace

StandInRouting RouteCuda(const objects::Environment& env, const std::string& stand_in,
                         const std::string& driver, bool enabled) {
  StandIn cuda;
  cuda.name = "CUDA driver stand-in (cuda/libcuda.so.1 beside libkcache-observe.so)";
  cuda.library = stand_in;
  cuda.real_variable = "KCACHE_REAL_LIBCUDA";
  cuda.found = driver;  // none (an image's build): nothing to say, nothing loads modules
  cuda.only_where_found = true;
  cuda.refuse = [stand_in](const std::string& real) -> std::string {
    absl::StatusOr<std::vector<std::string>> not_stood_in = FunctionsNotStoodIn(real, stand_in);
    if (!not_stood_in.ok()) {
      return absl::StrCat(
          "the CUDA driver's functions cannot be compared with kcache's driver "
          "stand-in's (",
          not_stood_in.status().message(),
          "): the stand-in is not preloaded, and module loads go to the driver "
          "as without kcache");
    }
    const std::vector<std::string>& missing = *not_stood_in;
    if (missing.empty()) return "";
    size_t shown = std::min<size_t>(missing.size(), 5);
    return absl::StrCat(
        "the CUDA driver ", real, " exports ", missing.size(),
        " functions kcache's driver stand-in does not (",
        absl::StrJoin(missing.begin(), missing.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        missing.size() > shown ? ", ..." : "",
        "): the stand-in is not preloaded, and module loads go to the driver as without kcache "
        "(a kcache built with a toolkit as new as the driver stands in for them)");
  };
  return RouteStandIn(env, cuda, enabled);
}

}  // namespace kcache::cli
