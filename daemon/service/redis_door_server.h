// RedisDoorServer: kcached's Redis-protocol door (docs/torch-compile.md), off unless
// --redis-listen names a unix socket ("unix:///path", the safe choice) or a TCP address
// ("127.0.0.1:6390": open to every local user). It frames RESP (engine/resp/resp.h) and
// answers with RedisCommands over the object cache.
//
// Connections (connection_server.h, kStream): `threads` threads share one epoll set; a
// connection is served by one thread at a time, so idle connections cost a descriptor and a
// little memory, never a thread. Bounds (each a flag, each refusal counted in redis.* statistics):
// - at most max_connections open (more are answered -ERR and closed);
// - per connection at most max_buffer_bytes of input not yet answered plus replies not yet
//   sent. Replies are checked against it as they are built: a command whose reply does not
//   fit waits, unanswered, until the client has read the replies before it, and the
//   connection is not read from meanwhile; a reply that cannot fit even then is answered
//   -ERR. A command whose input does not fit is answered -ERR and the connection closed;
// - across connections at most max_total_bytes held (input, commands waiting, replies and
//   the buffer they are sent from; the gauge redis.held_bytes), each byte counted before it is
//   held. Past it a reply is answered -ERR (retry later) at once, the connection served on (a
//   GET of the key just refused is refused again without reading its value while there is no
//   room), and a connection that needs to read more of an unfinished command is answered -ERR
//   and closed. Each connection may hold 128 KiB (a read and a small reply) whatever the
//   others hold, so one holding less than 64 KiB is always served and the door holds at most
//   max_total_bytes plus 128 KiB per connection;
// - a connection silent for idle_timeout is closed.
// A stream that cannot be framed is answered -ERR naming what was wrong, then closed.
#ifndef KCACHE_DAEMON_SERVICE_REDIS_DOOR_SERVER_H_
#define KCACHE_DAEMON_SERVICE_REDIS_DOOR_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/redis_commands.h"
#include "engine/objects/object_cache.h"

namespace kcache {

struct RedisDoorOptions {
  // --redis-listen: "HOST:PORT" (an IPv4 address or localhost; port 0 picks one) or
  // "unix:PATH" (a stale socket file must be gone already).
  std::string listen;
  // --redis-socket-mode: a unix socket's permissions. Owner only by default: the door has no
  // passwords, and Inductor's pt2: values hold Python its workers run.
  mode_t socket_mode = 0600;
  int max_connections = 1024;                        // --redis-max-connections
  uint64_t max_buffer_bytes = uint64_t{64} << 20;    // --redis-buffer-max-bytes
  uint64_t max_total_bytes = uint64_t{256} << 20;    // --redis-total-max-bytes
  absl::Duration idle_timeout = absl::Seconds(300);  // --redis-idle-seconds
  int threads = 2;
  RedisCommandOptions commands;  // --redis-namespaces, --redis-value/key-max-bytes
};

class RedisDoorServer {
 public:
  // Binds, listens and starts the threads. InvalidArgument for an address it cannot parse or
  // bounds that do not fit together; FailedPrecondition when it cannot bind. `objects` and `stats`
  // (where it counts, redis.*) are borrowed and must outlive the server.
  static absl::StatusOr<std::unique_ptr<RedisDoorServer>> Start(objects::ObjectCache* objects,
                                                                Statistics* stats,
                                                                RedisDoorOptions options);
  virtual ~RedisDoorServer() = default;
  // Closes the listener and every connection, joins the threads. Idempotent.
  virtual void Stop() = 0;
  // The TCP port bound (the one picked for port 0); 0 for a unix socket.
  virtual int port() const = 0;
  // Accepts put off for want of descriptors or memory (accept_rules.h).
  virtual uint64_t accept_failures() const = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_REDIS_DOOR_SERVER_H_
