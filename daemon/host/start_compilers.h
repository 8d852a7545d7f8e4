// The compilers kcached starts with: each toolkit loaded (--toolkit, else CUDA_HOME's) with a
// pool of sandboxed compile worker processes (engine/workers/process_pool.h), or none in
// serve-only mode (--no-toolkit, or no toolkit found where none was named).
#ifndef KCACHE_DAEMON_HOST_START_COMPILERS_H_
#define KCACHE_DAEMON_HOST_START_COMPILERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/host/daemon.h"
#include "daemon/service/kernel_cache_service.h"
#include "engine/workers/process_pool.h"

namespace kcache {

// Loads the toolkits and starts a compile process pool for each into `pools` (a miss compiles
// with the newest one the device's driver loads), and tells `service` the newest's archs, name
// and compile limit. `pools` stays empty in serve-only mode; `summary` says which mode and why.
// A toolkit named with --toolkit that does not load is an error; CUDA_HOME's absent is
// serve-only. Says in the log whether the workers are sandboxed.
absl::Status StartCompilers(const DaemonOptions& options,
                            std::vector<std::shared_ptr<ProcessPoolCompiler>>* pools,
                            ServiceOptions* service, std::string* summary);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_START_COMPILERS_H_
