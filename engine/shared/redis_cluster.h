// RedisCluster: a small Redis Cluster client over hiredis 0.14 (which has none). Routes each
// command by its key's slot (engine/shared/redis_slot.h) to the master that serves it, using
// the slot map read with CLUSTER SLOTS; follows MOVED (updates the map and re-reads it) and
// ASK (sends ASKING, then the command, to the importing node once); re-reads the map after a
// node stops answering, so a failover (a master gone, its replica promoted) costs retries,
// not failures, once the cluster has promoted the replica. A single Redis (redis://) is the
// same client with one node and no map.
//
// Reads and writes go to masters only: a replica may lag its master, and an artifact that
// a replica has not seen yet is a miss, but a lease read from a replica could be stale, so
// nothing is read from replicas.
//
// One connection per node, opened when first needed and reopened after an error; every call
// has a connect and a read/write timeout, and a whole call (with its redirects and retries)
// a deadline. Thread-safe: calls to one node take turns on its connection.
#ifndef KCACHE_ENGINE_SHARED_REDIS_CLUSTER_H_
#define KCACHE_ENGINE_SHARED_REDIS_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kcache {

struct RedisAddress {
  std::string host;
  int port = 0;
  std::string ToString() const;  // "host:port"
  bool operator==(const RedisAddress&) const = default;
};

// What `--shared URL` names: "redis://host:port" (one Redis, no cluster) or
// "redis-cluster://h1:p1,h2:p2,..." (any reachable nodes of a cluster: seeds for the map).
// The port defaults to 6379. InvalidArgument on anything else.
struct RedisEndpoints {
  bool cluster = false;
  std::vector<RedisAddress> seeds;  // at least one
};
absl::StatusOr<RedisEndpoints> ParseRedisUrl(absl::string_view url);

// A reply, copied out of hiredis. An error reply ("-ERR ...") is a Status, never a RedisReply.
struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus
  long long integer = 0;
  std::vector<RedisReply> elements;  // kArray
  bool is_nil() const { return type == Type::kNil; }
};

struct RedisOptions {
  absl::Duration connect_timeout = absl::Milliseconds(200);  // per connection attempt
  absl::Duration io_timeout = absl::Milliseconds(500);       // per read or write on a socket
  // Bound of one whole call, redirects and retries included. Past it: DeadlineExceeded.
  absl::Duration call_deadline = absl::Seconds(1);
  int max_redirects = 8;  // MOVED/ASK followed per call, then Unavailable
  // Pause between retries after a node did not answer, CLUSTERDOWN or TRYAGAIN.
  absl::Duration retry_pause = absl::Milliseconds(50);
};

class RedisCluster {
 public:
  // Parses `url` and remembers the seeds; connects only when first called (a cluster that is
  // down at start does not fail this). InvalidArgument for a bad URL.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Create(absl::string_view url,
                                                              RedisOptions options = {});
  virtual ~RedisCluster() = default;

  // Runs one command whose key is `args[key_index]` on the node serving that key's slot.
  // Errors: Unavailable (no node answered, too many redirects, CLUSTERDOWN), DeadlineExceeded
  // (the call deadline, or `deadline` when sooner, passed), Internal (an error reply, its text
  // in the message).
  virtual absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args,
                                             size_t key_index = 1,
                                             absl::Time deadline = absl::InfiniteFuture()) = 0;

  // Runs a command without a key (CLUSTER INFO, PING) on one reachable node (a seed, or a
  // node of the map).
  virtual absl::StatusOr<RedisReply> AnyNodeCommand(const std::vector<std::string>& args) = 0;

  // Shorthands over Command. Get: nullopt when the key is absent.
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key,
                                                 absl::Time deadline = absl::InfiniteFuture());
  // SET key value [PX ttl] (ttl zero: no expiry).
  absl::Status Set(absl::string_view key, absl::string_view value,
                   absl::Duration ttl = absl::ZeroDuration());
  // SET key value NX PX ttl: true when this call set it, false when the key existed.
  absl::StatusOr<bool> SetIfAbsent(absl::string_view key, absl::string_view value,
                                   absl::Duration ttl);
  absl::Status Delete(absl::string_view key);

  // Where the slot map now sends `slot` (empty before the map was read, and for one Redis).
  virtual std::optional<RedisAddress> NodeForSlot(int slot) const = 0;
  // Times the slot map was read since creation (for tests: MOVED and failovers re-read it).
  virtual uint64_t map_refreshes() const = 0;
  virtual bool is_cluster() const = 0;
};

}  // namespace kcache

#endif  // KCACHE_ENGINE_SHARED_REDIS_CLUSTER_H_
