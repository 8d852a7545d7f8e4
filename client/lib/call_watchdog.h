// CallWatchdog: cancels daemon calls that heard nothing from kcached for too long, or that
// ran past their whole limit. One thread serves every call of a connection; it starts with
// the first watched call (and again in a forked child, which has no thread of its parent's).
// Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_CALL_WATCHDOG_H_
#define KCACHE_CLIENT_LIB_CALL_WATCHDOG_H_

#include <sys/types.h>

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace grpc {
class ClientContext;
}

namespace kcache::client {

// Why a watched call was cancelled.
enum class WatchFired { kNo, kSilent, kOverLimit };

// Thread-safe. Destroy only when no Watch is alive.
class CallWatchdog {
 public:
  class Watch;

  CallWatchdog() = default;
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // Watches `context` (which must outlive the Watch): TryCancel once `silent_at` or `until`
  // passes, whichever is first, unless Set moves them first. Destroying the Watch stops it.
  std::unique_ptr<Watch> Start(grpc::ClientContext* context, absl::Time silent_at,
                               absl::Time until);

 private:
  friend class Watch;
  void Run();
  void Moved(absl::Time expiry);  // a watch's expiry is now `expiry`

  absl::Mutex mu_;
  absl::flat_hash_set<Watch*> watches_ ABSL_GUARDED_BY(mu_);
  absl::Time next_wake_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Started by the first Start, under mu_, in process `owner_`.
  std::unique_ptr<std::thread> thread_ ABSL_GUARDED_BY(mu_);
  pid_t owner_ ABSL_GUARDED_BY(mu_) = 0;
};

class CallWatchdog::Watch {
 public:
  ~Watch();
  // The call heard from the daemon: it is silent from `silent_at` on; its whole limit is now
  // `until` (which may only come closer).
  void Set(absl::Time silent_at, absl::Time until);
  // Whether, and why, the watchdog cancelled the call. Read after the call ended.
  WatchFired fired();

 private:
  friend class CallWatchdog;
  Watch(CallWatchdog* dog, grpc::ClientContext* context, absl::Time silent_at, absl::Time until)
      : dog_(dog), context_(context), silent_at_(silent_at), until_(until) {}
  absl::Time expiry() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(dog_->mu_) {
    return std::min(silent_at_, until_);
  }

  CallWatchdog* const dog_;
  grpc::ClientContext* const context_;
  absl::Time silent_at_ ABSL_GUARDED_BY(dog_->mu_);
  absl::Time until_ ABSL_GUARDED_BY(dog_->mu_);
  WatchFired fired_ ABSL_GUARDED_BY(dog_->mu_) = WatchFired::kNo;
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_CALL_WATCHDOG_H_
