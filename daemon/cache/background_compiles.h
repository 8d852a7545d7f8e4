// BackgroundCompiles: compiles that run after the answer that asked for them, one at a time, in
// the order queued, by a thread of their own. Two queues use it: the SASS a resolve leaves for
// later (ResolvePolicy::ptx_now: stored PTX is served now and its SASS compiled for the next
// caller), and the SASS built from PTX that clients sent at load (ArtifactCache::BuildFromPtx).
//
// Bounded: at most `bound` compiles wait, and at most `per_client` of them for one client
// (0: no such bound; a client is the name its requests give); past either a compile is dropped
// and counted (`counts.dropped`), and each one queued is counted (`counts.queued`). A compile
// of the same (kernel, target) as one still waiting is not queued twice. On destruction the
// compile running finishes and those still queued are dropped: nobody waits for them.
// Thread-safe.
#ifndef KCACHE_DAEMON_CACHE_BACKGROUND_COMPILES_H_
#define KCACHE_DAEMON_CACHE_BACKGROUND_COMPILES_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "daemon/cache/statistics.h"
#include "engine/compile/compiler.h"

namespace kcache {

// The statistics one queue of BackgroundCompiles counts in.
struct BackgroundCompileCounts {
  Statistic queued = Statistic::kBackgroundCompilesQueued;
  Statistic dropped = Statistic::kBackgroundCompilesDropped;
};

class BackgroundCompiles {
 public:
  // Compiles `job` with the owner's compiler number `toolkit` (its CompileFlights, so that a
  // foreground miss for the same artifact joins it); what becomes of it is the callee's to
  // store and count.
  using CompileFn = std::function<void(const CompileJob& job, size_t toolkit)>;

  using Counts = BackgroundCompileCounts;

  // `compile` runs on the thread of this class, one job at a time. `stats` is borrowed and
  // must outlive this, as must all that `compile` uses.
  BackgroundCompiles(size_t bound, CompileFn compile, Statistics* stats, Counts counts = {},
                     size_t per_client = 0);
  ~BackgroundCompiles();  // waits for the compile running; drops the queued ones
  BackgroundCompiles(const BackgroundCompiles&) = delete;
  BackgroundCompiles& operator=(const BackgroundCompiles&) = delete;

  enum class Added {
    kQueued,
    kAlreadyQueued,  // the same (kernel, target) waits already: not queued again, not counted
    kDropped,        // past `bound`
    kClientBound,    // past `per_client` for job.demand.client (counted dropped too)
  };
  // Queues `job` for compiler `toolkit` on behalf of job.demand.client, its demand replaced by
  // one that is always wanted (client "(background)"): a caller that joins its flight later is
  // never left without it.
  Added Add(CompileJob job, size_t toolkit);

 private:
  struct Queued {
    CompileJob job;
    size_t toolkit;
    std::string client;  // on whose behalf
    std::string key;     // kernel id and target: what is not queued twice
  };

  void Run();

  const size_t bound_;
  const size_t per_client_;
  const CompileFn compile_;
  Statistics* stats_;
  const Counts counts_;
  absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> keys_ ABSL_GUARDED_BY(mu_);                       // of queue_
  absl::flat_hash_map<std::string, size_t> per_client_queued_ ABSL_GUARDED_BY(mu_);  // of queue_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_BACKGROUND_COMPILES_H_
