// The torch.compile (Inductor, Triton) variables for kcached's Redis door.
#include "client/cli/torch_compile_env.h"

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/cli/server_connect.h"

namespace kcache::cli {

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> TorchCompileEnvironment(
    absl::string_view address, bool triton) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "1"},
      {"TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", "1"},
      {"TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE", "1"},
  };
  absl::string_view path = address;
  size_t colon = address.rfind(':');
  int port = 0;
  std::string door(address);
  if (absl::ConsumePrefix(&path, "unix:") && absl::StartsWith(path, "/")) {
    while (absl::StartsWith(path, "//")) path.remove_prefix(1);  // unix:///p and unix:/p alike
    // Inductor reads TORCHINDUCTOR_REDIS_URL (redis.Redis.from_url) before HOST and PORT.
    env.emplace_back("TORCHINDUCTOR_REDIS_URL", absl::StrCat("unix://", path));
    door = absl::StrCat("unix:", path);
  } else if (!absl::StartsWith(address, "unix:") && colon != absl::string_view::npos && colon > 0 &&
             absl::SimpleAtoi(address.substr(colon + 1), &port) && port > 0 && port < 65536) {
    env.emplace_back("TORCHINDUCTOR_REDIS_HOST", std::string(address.substr(0, colon)));
    env.emplace_back("TORCHINDUCTOR_REDIS_PORT", absl::StrCat(port));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis ", address,
                     ": give kcached's --redis-listen address, unix:///PATH or HOST:PORT (or "
                     "--redis alone: ask the kcached at --server)"));
  }
  if (!triton) return env;
  env.emplace_back("TRITON_CACHE_MANAGER", "triton.runtime.cache:RemoteCacheManager");
  env.emplace_back("TRITON_REMOTE_CACHE_BACKEND", "kcache.triton:Backend");
  env.emplace_back("KCACHE_REDIS_ADDR", door);
  return env;
}

absl::StatusOr<std::string> AskKcachedForDoor(const std::string& server) {
  absl::StatusOr<std::unique_ptr<client::Client>> c = ConnectForCli(server, /*timeout_s=*/10);
  if (!c.ok()) return c.status();
  absl::StatusOr<client::DaemonStats> stats = (*c)->Stat();
  if (!stats.ok()) return stats.status();
  if (stats->redis_door.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--redis: the kcached at ", server,
        " has no Redis door (or is older than kcache run --redis without an address): start it "
        "with --redis-listen unix:///run/kcache/redis.sock, or name the door: --redis ADDR"));
  }
  return stats->redis_door;
}

std::string TcpDoorWarning(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return "";
  return absl::StrCat(
      "kcache: the Redis door ", address,
      " is TCP: every local user and process in this network namespace can read and overwrite "
      "its values, and Inductor runs the Python they hold; prefer kcached --redis-listen "
      "unix:///PATH (docs/torch-compile.md)");
}

}  // namespace kcache::cli
