// For `kcache nvrtc-put`: an NVRTC compile the stand-in handed over, compiled again in this
// process by the same NVRTC, its outcome kept as the stand-in keeps the caller's
// (objects::KeptNvrtcOutput), so that the two compare byte for byte. nvrtc_clock_probe.h and
// nvrtc_any_directory.h compile it again under another date or in another directory.
#ifndef KCACHE_CLIENT_CLI_NVRTC_RECOMPILE_H_
#define KCACHE_CLIENT_CLI_NVRTC_RECOMPILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/nvrtc/nvrtc_compile.h"

namespace kcache::cli {

// The outcome of `program` compiled by the NVRTC at `library` (dlopen'd into this process, once)
// in this process's working directory. FailedPrecondition when the library cannot be loaded, or
// NVRTC refuses the program or a name expression before compiling.
absl::StatusOr<objects::NvrtcOutcome> RecompileNvrtc(const objects::NvrtcProgram& program,
                                                     const std::string& library);

// The log among an outcome's outputs (the stand-in's order: client/nvrtc/nvrtc_cache_abi.h).
inline const objects::NvrtcOutput& NvrtcLog(const objects::NvrtcOutcome& outcome) {
  return outcome.outputs.back();
}

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_NVRTC_RECOMPILE_H_
