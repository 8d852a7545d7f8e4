// CallWatchdog: the watches live in a set under one lock; the thread sleeps until the earliest
// expiry, or until a watch's expiry comes closer than that.
#include "client/lib/call_watchdog.h"

#include <grpcpp/client_context.h>
#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace kcache::client {

CallWatchdog::~CallWatchdog() {
  std::unique_ptr<std::thread> thread;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (owner_ == getpid()) thread = std::move(thread_);
    (void)thread_.release();  // a parent's thread, which this forked child does not have
  }
  if (thread != nullptr) thread->join();
}

std::unique_ptr<CallWatchdog::Watch> CallWatchdog::Start(grpc::ClientContext* context,
                                                         absl::Time silent_at, absl::Time until) {
  std::unique_ptr<Watch> watch(new Watch(this, context, silent_at, until));
  absl::MutexLock lock(&mu_);
  if (owner_ != getpid()) {   // the first call, or the first in a forked child
    (void)thread_.release();  // the parent's, if any: not in this process
    watches_.clear();         // the parent's calls: not in this process either
    next_wake_ = absl::InfiniteFuture();
    owner_ = getpid();
    thread_ = std::make_unique<std::thread>([this] { Run(); });
  }
  watches_.insert(watch.get());
  Moved(watch->expiry());
  return watch;
}

void CallWatchdog::Moved(absl::Time expiry) {
  if (expiry >= next_wake_) return;  // the thread wakes before it anyway
  next_wake_ = expiry;
  woken_ = true;
}

void CallWatchdog::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    for (Watch* watch : watches_) {
      if (watch->fired_ != WatchFired::kNo) continue;
      absl::Time expiry = watch->expiry();
      if (expiry <= now) {
        watch->fired_ = watch->silent_at_ <= now ? WatchFired::kSilent : WatchFired::kOverLimit;
        watch->context_->TryCancel();  // thread-safe, never waits
      } else {
        next = std::min(next, expiry);
      }
    }
    next_wake_ = next;
    woken_ = false;
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return woken_ || stop_; };
    mu_.AwaitWithDeadline(absl::Condition(&wake), next);
  }
}

CallWatchdog::Watch::~Watch() {
  absl::MutexLock lock(&dog_->mu_);
  dog_->watches_.erase(this);
}

void CallWatchdog::Watch::Set(absl::Time silent_at, absl::Time until) {
  absl::MutexLock lock(&dog_->mu_);
  silent_at_ = silent_at;
  until_ = std::min(until_, until);
  dog_->Moved(expiry());
}

WatchFired CallWatchdog::Watch::fired() {
  absl::MutexLock lock(&dog_->mu_);
  return fired_;
}

}  // namespace kcache::client
