// The NVRTC part of the environment `kcache run` gives its command and `kcache env` prints
// (docs/nvrtc-standin.md): kcache's libnvrtc.so.13 stand-in (client/nvrtc) in LD_PRELOAD, so
// that NVRTC inside the command's processes is the stand-in, and KCACHE_REAL_NVRTC, the real
// NVRTC it forwards every call to.
#ifndef KCACHE_CLIENT_CLI_NVRTC_ENV_H_
#define KCACHE_CLIENT_CLI_NVRTC_ENV_H_

#include <string>
#include <utility>
#include <vector>

#include "engine/objects/compiler_tools.h"

namespace kcache::cli {

struct NvrtcRouting {
  // The variables to set, in order: LD_PRELOAD and KCACHE_REAL_NVRTC (none when the stand-in
  // is not preloaded; with `enabled` false, LD_PRELOAD without the stand-in when it had it).
  std::vector<std::pair<std::string, std::string>> env;
  // Why $KCACHE_REAL_NVRTC was not kept, why the stand-in is not preloaded: a line each.
  std::vector<std::string> notes;
};

// The routing for the environment `env`, the stand-in at `stand_in` (objects::FindNvrtcStandIn;
// "" when it is not installed) and `toolkit_root`, the toolkit the run's nvcc comes from ("" when
// none). The real NVRTC is $KCACHE_REAL_NVRTC when it names a file that is not the stand-in
// (kept, so that a nested run and a user's choice hold), else <toolkit_root>/lib64/
// libnvrtc.so.13; without one, the stand-in is not preloaded. The stand-in is appended to
// LD_PRELOAD (after what the environment preloads, e.g. a sanitizer runtime), once. `enabled`
// false (--no-nvrtc) takes it out of an LD_PRELOAD that has it (a nested run) and sets nothing
// else.
NvrtcRouting RouteNvrtc(const objects::Environment& env, const std::string& stand_in,
                        const std::string& toolkit_root, bool enabled);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_NVRTC_ENV_H_
