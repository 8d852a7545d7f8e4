// FastLeases: the leases one fast-path connection holds on the arena (fast_arena.h), within
// --fast-leased-max-bytes, given back when it closes; FastArenaGauges mirrors what the arena
// holds in the fast.leases_held and fast.arena_bytes statistics after each change.
#ifndef KCACHE_DAEMON_SERVICE_FAST_LEASES_H_
#define KCACHE_DAEMON_SERVICE_FAST_LEASES_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/fast_arena.h"

namespace kcache {

// Thread-safe. `arena` and `stats` are borrowed and must outlive it.
class FastArenaGauges {
 public:
  FastArenaGauges(const FastArena* arena, Statistics* stats) : arena_(arena), stats_(stats) {}
  // Moves the gauges to what the arena holds now (the statistics only add: by the difference).
  void Publish();

 private:
  const FastArena* const arena_;
  Statistics* const stats_;
  absl::Mutex mu_;
  uint64_t leases_shown_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_shown_ ABSL_GUARDED_BY(mu_) = 0;
};

// Not thread-safe: one connection's, used by the thread serving it. `arena`, `gauges` and
// `stats` are borrowed and must outlive it. Destroying it gives back every lease it holds.
class FastLeases {
 public:
  FastLeases(FastArena* arena, FastArenaGauges* gauges, Statistics* stats, uint64_t max_bytes)
      : arena_(arena), gauges_(gauges), stats_(stats), max_bytes_(max_bytes) {}
  FastLeases(const FastLeases&) = delete;
  FastLeases& operator=(const FastLeases&) = delete;
  ~FastLeases();

  struct Leased {
    uint64_t lease = 0;   // the connection's number for it (FastResponse.lease)
    uint64_t offset = 0;  // where its bytes lie in the arena
  };
  // A new lease on the `size` bytes `place` puts in the arena (a FastArena::Place, PlaceBytes
  // or LeaseExisting), unless the connection's leases would then pass max_bytes. A refusal
  // (ResourceExhausted for the bound, or the arena's error: no room) is counted as
  // fast.fallback_* and says why.
  absl::StatusOr<Leased> Take(uint64_t size,
                              absl::FunctionRef<absl::StatusOr<FastArena::Placed>()> place);
  // Gives back `lease`; false when the connection holds none of that number.
  bool Release(uint64_t lease);

 private:
  struct Lease {
    uint64_t slot = 0;
    uint64_t bytes = 0;
  };

  FastArena* const arena_;
  FastArenaGauges* const gauges_;
  Statistics* const stats_;
  const uint64_t max_bytes_;
  absl::flat_hash_map<uint64_t, Lease> leases_;
  uint64_t next_lease_ = 1;
  uint64_t leased_bytes_ = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_FAST_LEASES_H_
