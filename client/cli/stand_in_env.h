// The stand-ins `kcache run` preloads into its command's processes (and `kcache env` prints):
// kcache's libnvrtc.so.13 and libnvrtc.so.12 (client/nvrtc, docs/nvrtc-standin.md) and, on a
// node with a CUDA
// driver, kcache's libcuda.so.1 (client/cuda, docs/ptx-libraries.md "Serving at load"). Each is
// appended to LD_PRELOAD, and a variable names the real library it forwards every call to.
#ifndef KCACHE_CLIENT_CLI_STAND_IN_ENV_H_
#define KCACHE_CLIENT_CLI_STAND_IN_ENV_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol.h"
#include "engine/keys/compiler_tools.h"

namespace kcache::cli {

struct StandInRouting {
  // The variables to set, in order: LD_PRELOAD and the real library's variable (none when the
  // stand-in is not preloaded; when disabled, LD_PRELOAD without the stand-in when it had it).
  std::vector<std::pair<std::string, std::string>> env;
  // Why the real library's variable was not kept, why the stand-in is not preloaded: a line each.
  std::vector<std::string> notes;
  StandInStart start = StandInStart::kNotRouted;
};

// One stand-in, and the real library it would forward to.
struct StandIn {
  std::string name;           // "NVRTC stand-in (nvrtc/libnvrtc.so.13)", for notes
  std::string library;        // its path; "" when it is not installed
  std::string real_variable;  // "KCACHE_REAL_NVRTC": where the stand-in finds the real library
  std::string found;          // the real library as found here; "" when none
  std::string not_found;      // a note's text when there is none (why, what to set); "": no note
  // Preloaded only where `found` is (the driver: where no driver loads without kcache, a
  // process must see none, whatever $<real_variable> names).
  bool only_where_found = false;
  // The stand-in finds the real library each process would load without it
  // (client/stand_in/loader_search.h), `found` being this environment's: $<real_variable> is
  // set only where the environment had it (kept), so that each process gets its own.
  bool per_process = false;
  // Asked of the real library chosen: a note's text when the stand-in must not stand in front
  // of it (it is then not preloaded, and taken out of an LD_PRELOAD that has it); "" to go on.
  std::function<std::string(const std::string& real)> refuse;
};

// The routing of `stand_in` for the environment `env`. The real library is $<real_variable>
// when it names a file that is not the stand-in (kept, so that a nested run and a user's choice
// hold), else `found`; without one, the stand-in is not preloaded (a note says so, when
// `not_found` has something to say; a stand-in not installed is a note when there was a real
// library to route; with `only_where_found` and nothing found, not preloaded either, and
// $<real_variable> set is a note). The stand-in is appended to
// LD_PRELOAD (after what the environment preloads, e.g. a sanitizer runtime), once. `enabled`
// false (--no-nvrtc, --no-cuda) takes it out of an LD_PRELOAD that has it (a nested run) and
// sets nothing else.
StandInRouting RouteStandIn(const objects::Environment& env, const StandIn& stand_in, bool enabled);

// NVRTC 13's: preloaded where there is an NVRTC 13 (FindNvrtc(13, ...)); each process's stand-in
// forwards to the one that process would load without it (StandIn::per_process);
// `stand_in` is objects::FindNvrtcStandIn's.
StandInRouting RouteNvrtc(const objects::Environment& env, const std::string& stand_in,
                          const std::string& found, bool enabled);

// NVRTC 12's (libnvrtc.so.12, KCACHE_REAL_NVRTC_12): preloaded where there is an NVRTC 12
// (FindNvrtc(12, ...); without one, no note: most environments have no NVRTC 12), per process
// as 13's; `stand_in` is objects::FindNvrtcStandIn's for 12.
StandInRouting RouteNvrtc12(const objects::Environment& env, const std::string& stand_in,
                            const std::string& found, bool enabled);

// The NVRTC `major` (13 or 12) a process of this environment loads without kcache, as the
// stand-in finds it (loader_search.h KcacheSearchNvrtc): for PATH's python3 (or python) the
// nvidia wheel of its environment (cuda-python, CuPy and torch load it from there), else where
// the loader finds it (LD_LIBRARY_PATH, its cache, the default directories), else
// <toolkit_root>/lib64's; "" when there is none.
std::string FindNvrtc(int major, const objects::ToolLookup& lookup,
                      const std::string& toolkit_root);

// The CUDA driver's: the real driver is `driver` (core/library_build.h FindCudaDriver's: the
// libcuda.so.1 the loader finds here, "" when none loads, in which case nothing is preloaded,
// whatever KCACHE_REAL_LIBCUDA names); `stand_in` is objects::FindCudaStandIn's. Preloaded
// only in front of a driver every one of whose API functions (cu[A-Z]..., elf_functions.h) the
// stand-in exports: a driver newer than the toolkit kcache was built with may export functions
// the stand-in lacks, which a process would then not find by name; a note names them.
StandInRouting RouteCuda(const objects::Environment& env, const std::string& stand_in,
                         const std::string& driver, bool enabled);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_STAND_IN_ENV_H_
