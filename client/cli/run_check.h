// `kcache run --check`: which compiler each way a build finds one reaches under the
// environment `kcache run` would give (run_environment.h), and whether through kcache. It
// runs nothing: it follows PATH, the variables and the links the way the build and kcache's
// launchers would, asking the launchers' own lookup (engine/launcher/prepared_command.h,
// RealCompiler) what each link runs. Last, what NVRTC inside the command's processes is (kcache's
// stand-in, the real NVRTC behind it, and whether it caches).
#ifndef KCACHE_CLIENT_CLI_RUN_CHECK_H_
#define KCACHE_CLIENT_CLI_RUN_CHECK_H_

#include <string>
#include <vector>

#include "engine/keys/compiler_tools.h"

namespace kcache::cli {

struct RouteReport {
  std::string text;         // one line per way, e.g. "nvcc via PATH: ... -> kcache-launch -> ..."
  bool all_through = true;  // false when some way reaches a compiler without kcache
};

// The report for `routed` (the command's environment and kcache's binaries) and `command`
// (its first word is looked up too; may be empty). `server_silent`: why the kcached that
// KCACHE_SERVER names did not answer (the caller asked it), "" when it did or none is named;
// the stand-ins then forward only, and the report is not all through.
RouteReport CheckRoutes(const objects::ToolLookup& routed, const std::vector<std::string>& command,
                        const std::string& server_silent = "");

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_RUN_CHECK_H_
