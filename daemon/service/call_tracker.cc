#include "daemon/service/call_tracker.h"

#include <vector>

namespace kcache {

CallTracker::Admission CallTracker::Enter(TrackedCall* call, bool bounded) {
  absl::MutexLock lock(&mu_);
  bool busy = bounded && limits_.max_calls > 0 && active_ >= limits_.max_calls;
  ++active_;
  if (draining_) return Admission::kDraining;
  if (busy) return Admission::kBusy;
  if (call != nullptr) calls_.insert(call);
  return Admission::kAdmitted;
}

void CallTracker::Forget(TrackedCall* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
}

void CallTracker::Exit() {
  absl::MutexLock lock(&mu_);
  --active_;
}

bool CallTracker::ReserveQueued(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (limits_.max_queued_bytes > 0 && queued_ + bytes > limits_.max_queued_bytes) return false;
  queued_ += bytes;
  return true;
}

void CallTracker::ReleaseQueued(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  queued_ -= bytes;
}

void CallTracker::StartDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool CallTracker::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int CallTracker::CancelAll(const absl::Status& status) {
  std::vector<TrackedCall*> running;
  {
    absl::MutexLock lock(&mu_);
    for (TrackedCall* call : calls_) {
      if (call->TryAddRef()) running.push_back(call);
    }
  }
  // Outside the lock: a call's reactions (and its last Unref, which takes the lock to
  // Forget) may run inline.
  for (TrackedCall* call : running) {
    call->CancelNow(status);
    call->Unref();
  }
  return static_cast<int>(running.size());
}

int64_t CallTracker::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

uint64_t CallTracker::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

}  // namespace kcache
