// CallTracker: counts the calls the service has in flight, so that shutdown can wait for them
// itself and then close every connection at once (gRPC's own graceful shutdown also waits
// for idle clients to notice a GOAWAY, which an idle client may take seconds to do).
#ifndef KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_
#define KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_

#include <atomic>
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

// The lifetime of a reactor whose call entered a CallTracker: one reference for gRPC (dropped
// in OnDone) plus one per background task working for the call (AddRef before it starts).
// The last Unref deletes the reactor, then tells the tracker the call is over: after the
// delete, because shutdown may tear down what the reactor used once the tracker is idle.
class TrackedCall {
 protected:
  explicit TrackedCall(CallTracker* tracker) : tracker_(tracker) {}
  virtual ~TrackedCall() = default;

  void AddRef() { refs_.fetch_add(1); }
  void Unref() {
    if (refs_.fetch_sub(1) != 1) return;
    CallTracker* tracker = tracker_;
    delete this;
    tracker->Exit();
  }

  CallTracker* const tracker_;

 private:
  std::atomic<int> refs_{1};  // gRPC's
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_
