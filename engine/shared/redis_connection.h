// One hiredis connection to one Redis node, for RedisCluster (redis_cluster.cc): opened when
// first used, closed after any connection or I/O error (a reply that may still arrive must
// not be read as the next call's), reopened by the next call. Thread-safe: calls take turns.
#ifndef KCACHE_ENGINE_SHARED_REDIS_CONNECTION_H_
#define KCACHE_ENGINE_SHARED_REDIS_CONNECTION_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/shared/redis_cluster.h"

struct redisContext;

namespace kcache {

// A reply as the node sent it: an error reply's text ("MOVED 3999 127.0.0.1:6381") in
// `error`, else the reply.
struct RedisRawReply {
  std::optional<std::string> error;
  RedisReply reply;
};

class RedisConnection {
 public:
  RedisConnection(RedisAddress address, absl::Duration connect_timeout, absl::Duration io_timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends `args` (after ASKING when `asking`) and reads the reply, waiting at most the
  // smaller of the configured timeouts and `budget` for the connect and for each read or
  // write. Unavailable when the node cannot be reached or the connection failed or timed out.
  absl::StatusOr<RedisRawReply> Call(const std::vector<std::string>& args, bool asking,
                                     absl::Duration budget);

  const RedisAddress& address() const { return address_; }

 private:
  absl::Status EnsureOpen(absl::Duration budget) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Fail(absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisAddress address_;
  const absl::Duration connect_timeout_;
  const absl::Duration io_timeout_;
  absl::Mutex mu_;
  redisContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace kcache

#endif  // KCACHE_ENGINE_SHARED_REDIS_CONNECTION_H_
