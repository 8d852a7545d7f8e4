// FastKernelAnswers: the fast path's answer to a Resolve (fast_path_server.h): where the
// artifact the cache already holds lies in the arena, under a lease of the asking connection,
// never compiled.
#ifndef KCACHE_DAEMON_SERVICE_FAST_KERNEL_ANSWERS_H_
#define KCACHE_DAEMON_SERVICE_FAST_KERNEL_ANSWERS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/cache/artifact_cache.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/fast_arena.h"
#include "daemon/service/fast_leases.h"
#include "kcache/v1/fast_path.pb.h"

namespace kcache {

// Thread-safe (the cache, the statistics and the arena are). Everything is borrowed and must
// outlive it.
class FastKernelAnswers {
 public:
  FastKernelAnswers(ArtifactCache* cache, Statistics* stats, FastArena* arena)
      : cache_(cache), stats_(stats), arena_(arena) {}

  // The answer to `request` (tagged `tag`): its header, offset and lease, taken in `leases`.
  // A lookup that never compiles (ArtifactCache::Peek), counted only when answered here: a
  // miss, PTX that gRPC may compile, or an answer past this path's bounds goes to gRPC, which
  // counts it (this path counts only fast.fallback_*). The refusal otherwise: InvalidArgument
  // (final: the client asks no more), NotFound (ask over gRPC), ResourceExhausted (a bound,
  // or a header too large for the path), or the cache's error.
  absl::StatusOr<v1::FastResponse> Resolve(FastLeases& leases, uint64_t tag,
                                           const v1::ResolveRequest& request) const;

 private:
  ArtifactCache* const cache_;
  Statistics* const stats_;
  FastArena* const arena_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_FAST_KERNEL_ANSWERS_H_
