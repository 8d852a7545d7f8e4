// A circuit breaker in front of the daemon: after `failures_to_open` consecutive failures it
// opens and callers stop waiting on the daemon; after `cooldown` one caller probes it
// (half-open); the probe's outcome closes or reopens the circuit.
#ifndef KCACHE_CLIENT_LIB_CIRCUIT_BREAKER_H_
#define KCACHE_CLIENT_LIB_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/lib/clock.h"
#include "kcache/kcache.h"

namespace kcache::client {

// Thread-safe.
class CircuitBreaker {
 public:
  // failures_to_open <= 0: never opens. `now` is the clock (tests pass their own).
  CircuitBreaker(
      int failures_to_open, absl::Duration cooldown,
      std::function<absl::Time()> now = [] { return Now(); });

  // Whether this call may go to the daemon. Closed: yes. Open: no until the cool-down has
  // passed; then yes for exactly one caller (the probe; the state becomes half-open) and no
  // for everyone else until the probe reports.
  bool Allow();
  // The outcome of a call that Allow() let through.
  void RecordSuccess();
  void RecordFailure();

  BreakerState state() const;
  // How long until the next probe may go (0 when closed or due).
  absl::Duration RetryIn() const;
  uint64_t times_opened() const;

 private:
  const int failures_to_open_;
  const absl::Duration cooldown_;
  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  BreakerState state_ ABSL_GUARDED_BY(mu_) = BreakerState::kClosed;
  int consecutive_failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time open_until_ ABSL_GUARDED_BY(mu_);
  uint64_t times_opened_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_CIRCUIT_BREAKER_H_
