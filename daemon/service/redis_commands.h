// RedisCommands: what kcached's Redis door answers (docs/torch-compile.md). The commands
// Inductor's and Triton's remote caches send (GET, SET, MGET, EXISTS, DEL), the handshake
// redis-py and redis-cli send (PING, HELLO 2/3, CLIENT SETINFO/SETNAME, SELECT 0, INFO,
// COMMAND, QUIT), kcache's KCACHE.DRIVER, and a clear -ERR for anything else. Values are named
// objects (engine/objects/named_object.h) in the object cache: the writable store, its checksums
// and LRU bound; a baked store's entry is served but never replaced. Not a Redis: no expiry (SET's
// EX/PX/EXAT/PXAT/KEEPTTL are accepted and ignored), one database, no other data types.
#ifndef KCACHE_DAEMON_SERVICE_REDIS_COMMANDS_H_
#define KCACHE_DAEMON_SERVICE_REDIS_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "engine/objects/object_cache.h"
#include "engine/resp/resp.h"

namespace kcache {

struct RedisCommandOptions {
  // --redis-namespaces: a key is served only when its text before the first ':' is one of
  // these ("pt2:..." is Inductor's, "triton:..." the kcache Triton backend's).
  std::vector<std::string> namespaces = {"pt2", "triton"};
  // --redis-value-max-bytes: a SET of a larger value is refused (the connection stays open).
  uint64_t max_value_bytes = uint64_t{32} << 20;
  // --redis-key-max-bytes: a command naming a longer key is refused (the connection stays
  // open). Keys are listed (`kcache ls --server`, `kcache export`): they stay small.
  uint64_t max_key_bytes = uint64_t{16} << 10;
  std::string version;  // kcached's, for HELLO and INFO
};

// One connection's state.
struct RedisSession {
  int64_t id = 0;     // CLIENT ID
  int protocol = 2;   // 2 or 3, set by HELLO
  bool quit = false;  // QUIT was answered: close once the reply is sent
  // KCACHE.DRIVER: the client's CUDA driver (cuDriverGetVersion, e.g. 12090). GET and MGET then
  // answer a cubin it cannot load, or whose toolkit cannot be read, as a miss. 0 = not told:
  // values are served unchecked.
  uint32_t driver = 0;
  // Who is connected (peer_identity.h Peer::words): the values SET stores say they put them.
  std::string peer;
};

// What the Redis door counts (redis.* statistics, daemon/cache/statistics.h); kConnections is
// a gauge that moves by the count's delta, which may be negative.
enum class RedisDoorCount {
  kHit,
  kMiss,
  kBytesIn,
  kBytesOut,
  kSet,
  kRefusedValueTooBig,
  kRefusedNamespace,
  kRefusedCommand,
  kRefusedProtocol,
  kRefusedConnections,
  kRefusedBuffer,
  kIdleClosed,
  kStoreError,
  kConnections,
  kRefusedDriverTooOld,    // a cubin the connection's driver cannot load, answered as a miss
  kRefusedToolkitUnknown,  // a cubin whose toolkit cannot be read, answered as a miss
  kRefusedTotal,           // every connection together held --redis-total-max-bytes
  kRefusedKeyTooBig,       // a key over --redis-key-max-bytes
};

// What Execute did with a command.
struct RedisExecuted {
  // False: its reply, `needed` bytes, would not fit the room given; nothing was appended,
  // counted or changed (a command whose reply may be large is only a read: GET, MGET, ECHO,
  // PING). Run it again with more room, or refuse it.
  bool answered = true;
  uint64_t needed = 0;
};

// Thread-safe (the object cache is; the session is the caller's). `cache` is borrowed and
// must outlive this.
class RedisCommands {
 public:
  RedisCommands(objects::ObjectCache* cache, RedisCommandOptions options,
                std::function<void(RedisDoorCount, int64_t)> count);

  // Appends the reply to `command` to *reply when there is room for it. A reply of up to
  // kSmallReplyBytes is appended without asking (the caller has made room for one); before a
  // larger one grows to `bytes`, room(bytes) is asked: true, the caller has made room for that
  // much of this reply (within one Execute, `bytes` only grows); false, nothing is appended,
  // counted or changed, and the result is answered = false with needed >= bytes. Never throws;
  // every refusal is a -ERR reply naming what was wrong, counted.
  RedisExecuted Execute(const resp::Command& command, RedisSession& session, std::string* reply,
                        absl::FunctionRef<bool(uint64_t bytes)> room) const;
  // The same with room for `room` bytes (at least kSmallReplyBytes, whatever `room` says).
  RedisExecuted Execute(const resp::Command& command, RedisSession& session, std::string* reply,
                        uint64_t room) const;
  static constexpr uint64_t kSmallReplyBytes = 64 << 10;

  const RedisCommandOptions& options() const { return options_; }

 private:
  struct Call;  // one command being answered (redis_commands.cc)
  void Dispatch(const resp::Command& command, Call& call) const;
  void Bulk(Call& call, absl::string_view value) const;  // one bulk reply, if it fits
  void Get(Call& call) const;
  void Set(Call& call) const;
  void MultiGet(Call& call) const;
  void Exists(Call& call) const;
  void Delete(Call& call) const;
  void Hello(Call& call) const;
  void Client(Call& call) const;
  void Info(Call& call) const;
  void Driver(Call& call) const;
  // Whether `value` may leave on `session`: false (counted) for a cubin its driver cannot load
  // or whose toolkit cannot be read (core/load_check.h CheckCubinForDriver).
  bool LoadsOnDriver(const RedisSession& session, absl::string_view value) const;
  void CountNotLoaded(const absl::Status& refused) const;  // CheckCubinForDriver's refusal
  // An error when `key` is over --redis-key-max-bytes or outside the namespaces (counted),
  // "" otherwise.
  std::string CheckKey(const std::string& key) const;

  objects::ObjectCache* const cache_;
  const RedisCommandOptions options_;
  const std::function<void(RedisDoorCount, int64_t)> count_;
  const std::string node_;  // this host's name, for who put a value
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_REDIS_COMMANDS_H_
