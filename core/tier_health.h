// TierHealth: the one rule for a tier that fails (a store, the shared tier, the fleet tier for
// client-made objects): it is switched off for a while and skipped, so a failing disk or Redis
// slows requests down instead of failing or stalling them, and it is tried again after a
// backoff that doubles while it keeps failing. Used by daemon/cache/store_tiers.h,
// daemon/cache/shared_tier.h and daemon/objects/fleet_object_cache.h.
#ifndef KCACHE_CORE_TIER_HEALTH_H_
#define KCACHE_CORE_TIER_HEALTH_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kcache {

// When a tier may be called. Off after a failure for `initial`, doubling with each failure
// after it comes back (up to `max`), reset by a success. Thread-safe.
class TierHealth {
 public:
  TierHealth(absl::Duration initial, absl::Duration max)
      : initial_(initial), max_(max), backoff_(initial) {}

  // True when the tier is on, or its time off is over (calls try it again).
  bool Available(absl::Time now) const;
  // Switches the tier off from `now`. True when it was on (a new switch-off).
  bool RecordFailure(absl::Time now);
  void RecordSuccess();

 private:
  const absl::Duration initial_, max_;
  mutable absl::Mutex mu_;
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_);
  absl::Time off_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace kcache

#endif  // KCACHE_CORE_TIER_HEALTH_H_
