// CallTracker: counts the calls the service has in flight, bounds them and the payload bytes
// queued for clients that read slowly (or never), and lets shutdown wait for the calls itself,
// finish the ones still running with CANCELLED when its grace runs out, and then close every
// connection at once (gRPC's own graceful shutdown also waits for idle clients to notice a
// GOAWAY, which an idle client may take seconds to do).
#ifndef KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_
#define KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kcache {

class CallTracker;

// The lifetime of a reactor whose call entered a CallTracker: one reference for gRPC (dropped
// in OnDone) plus one per background task working for the call (AddRef before it starts).
// The last Unref deletes the reactor, then tells the tracker the call is over: after the
// delete, because shutdown may tear down what the reactor used once the tracker is idle.
class TrackedCall {
 public:
  // Finishes the call now with `status` unless it is finished already or a write is in flight
  // (that write fails when the server closes, and its reaction finishes the call). Called by
  // CallTracker::CancelAll from a thread of its own, never under the tracker's lock.
  virtual void CancelNow(const absl::Status& status) = 0;

 protected:
  explicit TrackedCall(CallTracker* tracker) : tracker_(tracker) {}
  virtual ~TrackedCall() = default;

  void AddRef() { refs_.fetch_add(1); }
  inline void Unref();

  CallTracker* const tracker_;

 private:
  friend class CallTracker;
  // AddRef unless the last reference is already gone (the call is being deleted).
  bool TryAddRef() {
    int refs = refs_.load();
    while (refs > 0) {
      if (refs_.compare_exchange_weak(refs, refs + 1)) return true;
    }
    return false;
  }

  std::atomic<int> refs_{1};  // gRPC's
};

// What a call may hold at once. 0 means no bound (tests only: kcached always sets both).
struct CallLimits {
  int64_t max_calls = 1024;                         // --max-calls-in-flight
  uint64_t max_queued_bytes = uint64_t{256} << 20;  // --queued-max-bytes
};

// Thread-safe.
class CallTracker {
 public:
  explicit CallTracker(CallLimits limits = {}) : limits_(limits) {}

  enum class Admission { kAdmitted, kDraining, kBusy };

  // A call starts. kDraining: the caller answers UNAVAILABLE (ShuttingDownStatus); kBusy:
  // `limits().max_calls` calls are in flight already and the caller answers
  // RESOURCE_EXHAUSTED (BusyStatus). Either way the caller still calls Exit once gRPC is done
  // with it, as for any call that entered. An admitted `call` (optional) is one CancelAll
  // reaches until Forget(call). `bounded` false: never kBusy (Stat, so that an operator sees
  // a daemon at its bounds).
  Admission Enter(TrackedCall* call = nullptr, bool bounded = true);
  // The call is about to be deleted: CancelAll no longer reaches it.
  void Forget(TrackedCall* call);
  // gRPC is done with a call (its reactor's OnDone, or its last Unref).
  void Exit();

  // Reserves `bytes` of payload queued for a client until ReleaseQueued; false (nothing
  // reserved) when that would pass `limits().max_queued_bytes`.
  bool ReserveQueued(uint64_t bytes);
  void ReleaseQueued(uint64_t bytes);

  // From now on Enter() answers kDraining.
  void StartDraining();
  // Waits until no call is in flight or `deadline`; true when none is.
  bool WaitIdle(absl::Time deadline);
  // Finishes every registered call that is still running with `status` (TrackedCall::
  // CancelNow); returns how many were asked.
  int CancelAll(const absl::Status& status);

  const CallLimits& limits() const { return limits_; }
  int64_t active() const;
  uint64_t queued_bytes() const;

 private:
  const CallLimits limits_;
  mutable absl::Mutex mu_;
  int64_t active_ ABSL_GUARDED_BY(mu_) = 0;  // entered and not yet exited, refused ones too
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<TrackedCall*> calls_ ABSL_GUARDED_BY(mu_);  // admitted, not forgotten
};

void TrackedCall::Unref() {
  if (refs_.fetch_sub(1) != 1) return;
  CallTracker* tracker = tracker_;
  tracker->Forget(this);
  delete this;
  tracker->Exit();
}

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_CALL_TRACKER_H_
