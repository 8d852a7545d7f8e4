// BackgroundCompiles: the compiles a resolve leaves for after its answer (ResolvePolicy::
// ptx_now: stored PTX is served now and its SASS compiled for the next caller), run one at a
// time, in the order queued, by a thread of its own.
//
// Bounded: at most `bound` compiles wait; past it a compile is dropped (the PTX answer is
// served all the same) and counted (compile.background_dropped), and each one queued is
// counted (compile.background_queued). On destruction the compile running finishes and those
// still queued are dropped: nobody waits for them. Thread-safe.
#ifndef KCACHE_DAEMON_CACHE_BACKGROUND_COMPILES_H_
#define KCACHE_DAEMON_CACHE_BACKGROUND_COMPILES_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/cache/statistics.h"
#include "engine/compile/compiler.h"

namespace kcache {

class BackgroundCompiles {
 public:
  // Compiles `job` with the owner's compiler number `toolkit` (its CompileFlights, so that a
  // foreground miss for the same artifact joins it); what becomes of it is the callee's to
  // store and count.
  using CompileFn = std::function<void(const CompileJob& job, size_t toolkit)>;

  // `compile` runs on the thread of this class, one job at a time. `stats` is borrowed and
  // must outlive this, as must all that `compile` uses.
  BackgroundCompiles(size_t bound, CompileFn compile, Statistics* stats);
  ~BackgroundCompiles();  // waits for the compile running; drops the queued ones
  BackgroundCompiles(const BackgroundCompiles&) = delete;
  BackgroundCompiles& operator=(const BackgroundCompiles&) = delete;

  // Queues `job` for compiler `toolkit`, its demand replaced by one that is always wanted
  // (client "(background)"): a caller that joins its flight later is never left without it.
  // False when it was dropped (the bound).
  bool Add(CompileJob job, size_t toolkit);

 private:
  struct Queued {
    CompileJob job;
    size_t toolkit;
  };

  void Run();

  const size_t bound_;
  const CompileFn compile_;
  Statistics* stats_;
  absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_BACKGROUND_COMPILES_H_
