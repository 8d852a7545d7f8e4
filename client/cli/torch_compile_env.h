// The environment that routes torch.compile's caches through kcached's Redis door
// (docs/torch-compile.md): what `kcache run --redis` sets and `kcache env --redis` prints
// beside the compiler launchers' variables.
#ifndef KCACHE_CLIENT_CLI_TORCH_COMPILE_ENV_H_
#define KCACHE_CLIENT_CLI_TORCH_COMPILE_ENV_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache::cli {

// For the door at `address` (kcached's --redis-listen: "HOST:PORT" or "unix:/PATH"):
// Inductor's FX-graph, AOTAutograd and autotune remote caches on, pointed at it
// (TORCHINDUCTOR_REDIS_HOST and _PORT, or TORCHINDUCTOR_REDIS_URL=unix://PATH for a socket);
// Triton's RemoteCacheManager with kcache's backend (kcache.triton:Backend, which reads
// KCACHE_REDIS_ADDR), unless `triton` is false (a worker whose Python lacks the kcache package:
// Triton would fail to import the backend, so its cache stays its own local directory).
// InvalidArgument naming the expected forms for anything else.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> TorchCompileEnvironment(
    absl::string_view address, bool triton = true);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_TORCH_COMPILE_ENV_H_
