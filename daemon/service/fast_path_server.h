// FastPathServer: kcached's in-pod fast path (docs/kcached.md "The fast path", the protocol in
// docs/protocol.md). A SOCK_SEQPACKET unix socket beside the gRPC one: on connect a client gets
// the read-only arena's descriptor (SCM_RIGHTS); each Resolve it sends is answered with where
// the artifact lies in the arena and a lease that keeps it there, never with the bytes.
//
// The compiler launchers' object lookups (list_objects, get_object) are served here too when
// the daemon has an object cache: the listing or the bundle goes into the arena like an
// artifact, under the same lease bounds; puts, and listings of every entry, are gRPC's.
//
// Resolves here never compile (allow_compile = false): a miss answers NOT_FOUND and the client
// asks over gRPC. Requests pass the same validation as the gRPC Resolve (request_limits.h) and
// count in the same statistics, plus fast.* (daemon/cache/statistics.h).
//
// Connections (connection_server.h, kPackets): `threads` threads share one epoll set; a
// connection is served by one thread at a time, at most kFastBatch messages per turn, in
// order, and its turn's answers are sent together. A lookup that blocks on a store blocks one
// thread. Memory: the arena (its size is the bound of what clients can make the daemon hold),
// one receive buffer per thread, and per connection its leases' table and at most kFastBatch
// unsent answers; a client that does not read its answers is not read from.
//
// Files: fast_path_server.cc (the protocol: greeting, requests, refusals),
// fast_kernel_answers.cc (Resolve), fast_object_answers.cc (the launchers' lookups and notes),
// fast_leases.cc (a connection's leases on the arena, fast_arena.h).
#ifndef KCACHE_DAEMON_SERVICE_FAST_PATH_SERVER_H_
#define KCACHE_DAEMON_SERVICE_FAST_PATH_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/protocol.h"
#include "daemon/cache/artifact_cache.h"
#include "daemon/cache/statistics.h"
#include "engine/objects/object_cache.h"

namespace kcache {

// Messages a thread takes from one connection before it serves the next.
inline constexpr int kFastBatch = 32;

struct FastPathOptions {
  std::string socket_path;  // --fast-socket: bound here (a stale file must be gone already)
  mode_t socket_mode = 0660;
  uint64_t arena_bytes = uint64_t{1} << 30;         // --fast-arena-bytes
  uint64_t max_leased_bytes = uint64_t{256} << 20;  // --fast-leased-max-bytes
  int max_connections = 256;                        // --fast-max-connections
  int threads = 2;                                  // serving threads
  // The object cache's generation (objects::MemoObjectCache::Generation). While it stays the
  // same, a compiler-object listing or bundle answered once is answered again from its slot
  // in the arena, not read, encoded and checksummed again per launcher. Unset: never.
  std::function<uint64_t()> objects_generation;
};

class FastPathServer {
 public:
  // Creates the arena (FastArena::Create), binds and listens, starts the threads.
  // FailedPrecondition when the kernel cannot seal the arena (the caller logs it and serves
  // gRPC only); other errors when the socket cannot be bound.
  // `objects` (nullable: then object requests are refused as FAILED_PRECONDITION) is borrowed
  // like `cache`; the fast path counts its own doings (fast.*, objects.*) in `stats`, borrowed.
  static absl::StatusOr<std::unique_ptr<FastPathServer>> Start(
      ArtifactCache* cache, Statistics* stats, FastPathOptions options,
      objects::ObjectCache* objects = nullptr);
  // Stops: closes the listener and every connection (their leases go), joins the threads.
  // `cache` must outlive it.
  virtual ~FastPathServer() = default;
  virtual void Stop() = 0;
  // Copies `artifact` into the arena now, unleased (kept until its room is needed), so that a
  // later answer with it finds its slot written and its pages in place. For the start-up
  // warm: takes no lease and evicts nothing (an arena without free room skips it).
  virtual void Preload(const std::shared_ptr<const Artifact>& artifact) = 0;
  // Accepts put off for want of descriptors or memory (accept_rules.h).
  virtual uint64_t accept_failures() const = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_FAST_PATH_SERVER_H_
