// The torch.compile (Inductor, Triton) variables for kcached's Redis door.
#include "client/cli/torch_compile_env.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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
  if (absl::ConsumePrefix(&path, "unix:") && absl::StartsWith(path, "/")) {
    env.emplace_back("TORCHINDUCTOR_REDIS_URL", absl::StrCat("unix://", path));
  } else if (!absl::StartsWith(address, "unix:") && colon != absl::string_view::npos && colon > 0 &&
             absl::SimpleAtoi(address.substr(colon + 1), &port) && port > 0 && port < 65536) {
    env.emplace_back("TORCHINDUCTOR_REDIS_HOST", std::string(address.substr(0, colon)));
    env.emplace_back("TORCHINDUCTOR_REDIS_PORT", absl::StrCat(port));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--redis ", address, ": give kcached's --redis-listen address, HOST:PORT or unix:/PATH"));
  }
  if (!triton) return env;
  env.emplace_back("TRITON_CACHE_MANAGER", "triton.runtime.cache:RemoteCacheManager");
  env.emplace_back("TRITON_REMOTE_CACHE_BACKEND", "kcache.triton:Backend");
  env.emplace_back("KCACHE_REDIS_ADDR", std::string(address));
  return env;
}

}  // namespace kcache::cli
