// CompileFlights: compiles each (kernel, target) once however many ask at the same moment —
// resolve misses and warm jobs alike — stores the result in the writable store and drops the
// kernel's memory entries (its best answer for some devices may have changed).
#ifndef KCACHE_DAEMON_CACHE_COMPILE_FLIGHTS_H_
#define KCACHE_DAEMON_CACHE_COMPILE_FLIGHTS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/artifact.h"
#include "daemon/cache/memory_lru.h"
#include "daemon/cache/shared_tier.h"
#include "daemon/cache/single_flight.h"
#include "daemon/cache/statistics.h"
#include "daemon/cache/store_tiers.h"
#include "engine/compile/compiler.h"

namespace kcache {

// What one flight produced, shared by every caller of it.
struct CompiledSet {
  std::vector<std::shared_ptr<const Artifact>> artifacts;  // immutable
  bool from_store = false;   // an earlier flight had stored them all: nothing was compiled
  bool from_shared = false;  // fetched from the shared tier (and written to the writable store)
  // The artifact of `kind` for `target`, or null.
  std::shared_ptr<const Artifact> Find(ArtifactKind kind, const Target& target) const;
};
using CompileResult = absl::StatusOr<std::shared_ptr<const CompiledSet>>;

// Thread-safe. Borrows everything it is given; all must outlive it. `shared` may be null (no
// shared tier).
class CompileFlights {
 public:
  CompileFlights(Compiler* compiler, HealthCheckedTiers* tiers, MemoryLru* memory,
                 Statistics* stats, absl::Duration limit_backoff = absl::Minutes(10),
                 SharedTier* shared = nullptr)
      : compiler_(compiler),
        tiers_(tiers),
        memory_(memory),
        stats_(stats),
        limit_backoff_(limit_backoff),
        shared_(shared) {}

  // Runs or joins the flight for (job.id, job.target). The one that runs it first looks in the
  // writable store for what `job` would write (a flight that just ended may have stored it),
  // then in the shared tier (a hit is written to the writable store), else compiles, queues
  // the artifacts for the shared tier, stores each artifact (a failing store is counted and
  // skipped: the result is still returned) and invalidates the kernel's memory entries. `*waited`
  // says whether this caller joined another's flight. Errors are the compiler's (Aborted with the
  // NVRTC log; Cancelled when the compile left the queue because every caller of the flight had
  // given up 2 s ago or more: job.demand.wanted of each is asked, a caller that asks again within
  // those 2 s joins the queued compile, and a caller still waiting is never left with that
  // answer).
  //
  // A flight stopped by a limit (DeadlineExceeded, ResourceExhausted) is remembered for
  // `limit_backoff`: callers for the same (kernel, target) in that time get its error at once,
  // saying so, instead of holding a worker for as long again.
  //
  // `watch` (when given) is pointed at the flight's CompileStatus before this caller waits:
  // every caller of one flight reads the same status (queued, compiling, in the shared tier),
  // with the time a compile of the same kernel took before (ExpectedCompileTime) when one was
  // recorded.
  CompileResult CompileOnce(const CompileJob& job, bool* waited = nullptr,
                            CompileWatch* watch = nullptr);

  // A Compiler whose compiles go through CompileOnce, for engine/warm's Warm(): a warm and a
  // miss for the same artifact compile once. Borrows this.
  std::unique_ptr<Compiler> AsCompiler();

 private:
  // Who still waits for one flight: the `wanted` of every caller in it now. Shared by the
  // callers of a key while any is registered; the flight's job asks it.
  class Interest;
  std::shared_ptr<Interest> Register(const std::string& key, const CompileDemand& demand,
                                     size_t* ticket);
  void Unregister(const std::string& key, size_t ticket);

  CompileResult Run(const CompileJob& job);
  std::shared_ptr<const CompiledSet> FindStored(const CompileJob& job);
  // The longest compile_micros the store tiers record for any artifact of `id` (another
  // target, or another toolkit): what a compile of it is expected to take. 0: none recorded.
  absl::Duration ExpectedCompileTime(const KernelId& id);
  // What `job` would write, from the shared tier: there already, or compiled by another
  // daemon holding the fleet's lease while this one waited. Null: compile here (holding the
  // lease when `*lease` is set).
  std::shared_ptr<const CompiledSet> FetchShared(const CompileJob& job, std::string* lease);
  // The remembered limit stop of `key`, if one is recent (then counted).
  std::optional<absl::Status> RecentLimitStop(const std::string& key);
  void RememberLimitStop(const std::string& key, const absl::Status& status);

  Compiler* compiler_;
  HealthCheckedTiers* tiers_;
  MemoryLru* memory_;
  Statistics* stats_;
  const absl::Duration limit_backoff_;
  SharedTier* shared_;
  SingleFlight<std::string, CompileResult> flights_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Interest>> interests_ ABSL_GUARDED_BY(mu_);
  struct LimitStop {
    absl::Status status;
    absl::Time until;
  };
  // Bounded: past kMaxLimitStops entries the expired ones go, then the oldest.
  absl::flat_hash_map<std::string, LimitStop> limit_stops_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_COMPILE_FLIGHTS_H_
