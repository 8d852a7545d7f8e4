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

// For the door at `address` (kcached's --redis-listen: "unix:///PATH", "unix:/PATH" or
// "HOST:PORT"):
// Inductor's FX-graph, AOTAutograd and autotune remote caches on, pointed at it
// (TORCHINDUCTOR_REDIS_HOST and _PORT, or TORCHINDUCTOR_REDIS_URL=unix://PATH for a socket);
// Triton's RemoteCacheManager with kcache's backend (kcache.triton:Backend, which reads
// KCACHE_REDIS_ADDR), unless `triton` is false (a worker whose Python lacks the kcache package:
// Triton would fail to import the backend, so its cache stays its own local directory).
// InvalidArgument naming the expected forms for anything else.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> TorchCompileEnvironment(
    absl::string_view address, bool triton = true);

// The Redis door of the kcached at `server`, as it reports it (its Stat: "unix:///PATH" or
// "HOST:PORT"): what `kcache run --server ADDR --redis` uses when --redis names none.
// FailedPrecondition saying how to turn the door on when that kcached has none (or is older
// than the report); the connection's error when it cannot be asked.
absl::StatusOr<std::string> AskKcachedForDoor(const std::string& server);

// A warning to print for a door on TCP (every local user can use it); "" for a unix socket.
std::string TcpDoorWarning(absl::string_view address);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_TORCH_COMPILE_ENV_H_
