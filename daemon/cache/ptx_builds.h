// SASS built from the PTX that loads sent (ArtifactCache::BuildFromPtx; docs/ptx-libraries.md,
// "Serving at load"): the PTX checked, its SASS target and toolkit picked, what a store already
// holds answered as held, the rest queued on a thread of its own with a share per client
// (--ptx-build-queue, --ptx-build-queue-per-client), compiled through the kernels' flights (so
// a foreground miss for the same artifact joins it) and stored there; each outcome counted.
//
// Thread-safe: Build may be called from any thread. Everything passed in is borrowed and must
// outlive this; its destructor waits for the build running and drops the queued ones.
#ifndef KCACHE_DAEMON_CACHE_PTX_BUILDS_H_
#define KCACHE_DAEMON_CACHE_PTX_BUILDS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/background_compiles.h"
#include "daemon/cache/cache_types.h"
#include "daemon/cache/compile_flights.h"
#include "daemon/cache/statistics.h"
#include "daemon/cache/store_tiers.h"
#include "engine/compile/toolkit.h"

namespace kcache {

class PtxBuilds {
 public:
  struct Options {
    size_t queue = 32;            // CacheOptions::ptx_build_queue
    size_t queue_per_client = 8;  // CacheOptions::ptx_build_queue_per_client
    bool compile_allowed = true;  // false: --no-toolkit; nothing is built
    // false: the workers cannot be sandboxed and kcached builds nothing clients send
    bool compile_client_sources = true;
  };
  // `toolkits[i]` is `flights[i]`'s toolkit; none: nothing is built.
  PtxBuilds(Options options, HealthCheckedTiers* tiers, std::vector<const Toolkit*> toolkits,
            std::vector<CompileFlights*> flights, Statistics* stats);

  // Queues the build of `request`'s SASS, or says it is held or queued already; refused with
  // why (FailedPrecondition: this kcached builds nothing of clients'; InvalidArgument: not PTX,
  // or no SASS runs its PTX on that GPU; NotFound: no toolkit builds it; ResourceExhausted: the
  // queue or the client's share is full). Counted: refused, held; the queue counts the rest.
  absl::StatusOr<PtxBuildQueued> Build(const PtxBuildRequest& request);

 private:
  absl::StatusOr<PtxBuildQueued> Queue(const PtxBuildRequest& request);
  // Whether a store tier holds SASS for `target` built from PTX `module` that `driver` loads.
  bool HoldsSass(const KernelId& module, const Target& target, uint32_t driver);
  // The queue's compile of one job, counted.
  void BuildOne(const CompileJob& job, size_t toolkit);

  const Options options_;
  HealthCheckedTiers* const tiers_;
  const std::vector<const Toolkit*> toolkits_;
  const std::vector<CompileFlights*> flights_;
  Statistics& stats_;
  std::unique_ptr<BackgroundCompiles> queue_;  // null without a toolkit; last: stopped first
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_PTX_BUILDS_H_
