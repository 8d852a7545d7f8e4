// CallWatchdog: the watches live in a set under one lock; the thread sleeps until the earliest
// expiry, or until a watch's expiry comes closer than that.
#include "client/lib/call_watchdog.h"

#include <grpcpp/client_context.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace kcache::client {

struct CallWatchdog::State {
  explicit State(pid_t owner) : owner(owner) {}

  void Run();
  void Moved(absl::Time expiry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);  // a watch's expiry is now this

  const pid_t owner;  // the process it serves
  absl::Mutex mu;
  absl::flat_hash_set<Watch*> watches ABSL_GUARDED_BY(mu);
  absl::Time next_wake ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();
  bool woken ABSL_GUARDED_BY(mu) = false;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::thread thread;  // started once, right after construction
};

CallWatchdog::~CallWatchdog() {
  State* state = state_.load();
  if (state == nullptr || state->owner != getpid()) return;  // none, or a parent's: left behind
  {
    absl::MutexLock lock(&state->mu);
    state->stop = true;
  }
  state->thread.join();
  delete state;
}

CallWatchdog::State* CallWatchdog::Current() {
  pid_t self = getpid();
  State* state = state_.load();
  while (state == nullptr || state->owner != self) {  // the first call here, or in a child
    auto* mine = new State(self);
    if (state_.compare_exchange_strong(state, mine)) {
      mine->thread = std::thread([mine] { mine->Run(); });
      return mine;
    }
    delete mine;  // another thread of this process made it first: `state` is now that one
  }
  return state;
}

std::unique_ptr<CallWatchdog::Watch> CallWatchdog::Start(grpc::ClientContext* context,
                                                         absl::Time silent_at, absl::Time until) {
  State* state = Current();
  std::unique_ptr<Watch> watch(new Watch(state, context, silent_at, until));
  absl::MutexLock lock(&state->mu);
  state->watches.insert(watch.get());
  state->Moved(watch->expiry());
  return watch;
}

void CallWatchdog::State::Moved(absl::Time expiry) {
  if (expiry >= next_wake) return;  // the thread wakes before it anyway
  next_wake = expiry;
  woken = true;
}

void CallWatchdog::State::Run() {
  absl::MutexLock lock(&mu);
  while (!stop) {
    absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    for (Watch* watch : watches) {
      if (watch->fired_ != WatchFired::kNo) continue;
      absl::Time expiry = watch->expiry();
      if (expiry <= now) {
        watch->fired_ = watch->silent_at_ <= now ? WatchFired::kSilent : WatchFired::kOverLimit;
        watch->context_->TryCancel();  // thread-safe, never waits
      } else {
        next = std::min(next, expiry);
      }
    }
    next_wake = next;
    woken = false;
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return woken || stop; };
    mu.AwaitWithDeadline(absl::Condition(&wake), next);
  }
}

CallWatchdog::Watch::~Watch() {
  absl::MutexLock lock(&state_->mu);
  state_->watches.erase(this);
}

void CallWatchdog::Watch::Set(absl::Time silent_at, absl::Time until) {
  absl::MutexLock lock(&state_->mu);
  silent_at_ = silent_at;
  until_ = std::min(until_, until);
  state_->Moved(expiry());
}

WatchFired CallWatchdog::Watch::fired() {
  absl::MutexLock lock(&state_->mu);
  return fired_;
}

}  // namespace kcache::client
