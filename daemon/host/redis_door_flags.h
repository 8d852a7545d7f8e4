// kcached's --redis-* flags (docs/kcached.md, docs/torch-compile.md) -> RedisDoorOptions.
#ifndef KCACHE_DAEMON_HOST_REDIS_DOOR_FLAGS_H_
#define KCACHE_DAEMON_HOST_REDIS_DOOR_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "daemon/service/redis_door_server.h"

namespace kcache {

// The flags' text forms, turned into `options` by FinishRedisDoorFlags after parsing.
struct RedisDoorFlags {
  std::string namespaces = "pt2,triton";
  std::string socket_mode = "0600";
  int64_t idle_seconds = 300;
};

// Adds --redis-listen, --redis-socket-mode, --redis-namespaces, --redis-value-max-bytes,
// --redis-key-max-bytes, --redis-buffer-max-bytes, --redis-total-max-bytes (size_flags.h),
// --redis-max-connections and --redis-idle-seconds. `options` and `flags` must outlive the
// parse.
void AddRedisDoorFlags(CLI::App& app, RedisDoorOptions& options, RedisDoorFlags& flags);

// InvalidArgument for a namespace that is empty or holds ':' or a space, or a bad mode.
absl::Status FinishRedisDoorFlags(const RedisDoorFlags& flags, RedisDoorOptions& options);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_REDIS_DOOR_FLAGS_H_
