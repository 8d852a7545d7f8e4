// CallTracker: counts the calls the service has in flight, so that shutdown can wait for them
// itself and then close every connection at once (gRPC's own graceful shutdown also waits
// for idle clients to notice a GOAWAY, which an idle client may take seconds to do).
#ifndef KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_
#define KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kcache {

// Thread-safe.
class CallTracker {
 public:
  // A call starts. False when draining: the caller answers UNAVAILABLE (and still calls
  // Exit once gRPC is done with it, as for any call that entered).
  bool Enter() {
    absl::MutexLock lock(&mu_);
    ++active_;
    return !draining_;
  }
  // gRPC is done with a call (its reactor's OnDone).
  void Exit() {
    absl::MutexLock lock(&mu_);
    --active_;
  }
  // From now on Enter() answers false.
  void StartDraining() {
    absl::MutexLock lock(&mu_);
    draining_ = true;
  }
  // Waits until no call is in flight or `deadline`; true when none is.
  bool WaitIdle(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; };
    return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
  }
  int64_t active() const {
    absl::MutexLock lock(&mu_);
    return active_;
  }

 private:
  mutable absl::Mutex mu_;
  int64_t active_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_
