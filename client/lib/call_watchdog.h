// CallWatchdog: cancels daemon calls that heard nothing from kcached for too long, or that
// ran past their whole limit. One thread serves every call of a connection; it starts with
// the first watched call (and again in a forked child, which has no thread of its parent's,
// with a lock of its own).
// Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_CALL_WATCHDOG_H_
#define KCACHE_CLIENT_LIB_CALL_WATCHDOG_H_

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <memory>

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
  // One process's watchdog: its lock, its watches and its thread. A forked child makes its own
  // and never touches its parent's (whose lock may have been held, or waited on, by a thread
  // the child does not have): it is left behind, unused.
  struct State;
  // This process's State, made by the first Start here.
  State* Current();

  std::atomic<State*> state_{nullptr};
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
  friend struct CallWatchdog::State;
  Watch(State* state, grpc::ClientContext* context, absl::Time silent_at, absl::Time until)
      : state_(state), context_(context), silent_at_(silent_at), until_(until) {}
  absl::Time expiry() const { return std::min(silent_at_, until_); }

  State* const state_;
  grpc::ClientContext* const context_;
  // Guarded by state_->mu.
  absl::Time silent_at_;
  absl::Time until_;
  WatchFired fired_ = WatchFired::kNo;
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_CALL_WATCHDOG_H_
