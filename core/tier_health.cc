#include "core/tier_health.h"

#include <algorithm>

namespace kcache {

bool TierHealth::Available(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return now >= off_until_;
}

bool TierHealth::RecordFailure(absl::Time now) {
  absl::MutexLock lock(&mu_);
  bool was_on = now >= off_until_;
  if (!was_on) return false;  // a call that started before the switch-off
  off_until_ = now + backoff_;
  backoff_ = std::min(backoff_ * 2, max_);
  return true;
}

void TierHealth::RecordSuccess() {
  absl::MutexLock lock(&mu_);
  backoff_ = initial_;
}

}  // namespace kcache
