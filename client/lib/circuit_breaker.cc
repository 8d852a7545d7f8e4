#include "client/lib/circuit_breaker.h"

#include <algorithm>
#include <utility>

namespace kcache::client {

CircuitBreaker::CircuitBreaker(int failures_to_open, absl::Duration cooldown,
                               std::function<absl::Time()> now)
    : failures_to_open_(failures_to_open), cooldown_(cooldown), now_(std::move(now)) {}

bool CircuitBreaker::Allow() {
  absl::MutexLock lock(&mu_);
  switch (state_) {
    case BreakerState::kClosed:
      return true;
    case BreakerState::kHalfOpen:
      return false;  // a probe is in flight
    case BreakerState::kOpen:
      if (now_() < open_until_) return false;
      state_ = BreakerState::kHalfOpen;  // this caller is the probe
      return true;
  }
  return true;
}

void CircuitBreaker::RecordSuccess() {
  absl::MutexLock lock(&mu_);
  consecutive_failures_ = 0;
  state_ = BreakerState::kClosed;
}

void CircuitBreaker::RecordFailure() {
  absl::MutexLock lock(&mu_);
  if (failures_to_open_ <= 0) return;
  ++consecutive_failures_;
  if (state_ == BreakerState::kHalfOpen || consecutive_failures_ >= failures_to_open_) {
    if (state_ != BreakerState::kOpen) ++times_opened_;
    state_ = BreakerState::kOpen;
    open_until_ = now_() + cooldown_;
  }
}

BreakerState CircuitBreaker::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

absl::Duration CircuitBreaker::RetryIn() const {
  absl::MutexLock lock(&mu_);
  if (state_ != BreakerState::kOpen) return absl::ZeroDuration();
  return std::max(absl::ZeroDuration(), open_until_ - now_());
}

uint64_t CircuitBreaker::times_opened() const {
  absl::MutexLock lock(&mu_);
  return times_opened_;
}

}  // namespace kcache::client
