// CallWatchdog: the watches live in a set under one lock; the thread sleeps until the earliest
// expiry, or until a watch's expiry comes closer than that.
#include "client/lib/call_watchdog.h"

#include <grpcpp/client_context.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "client/lib/clock.h"

namespace kcache::client {

// Its lock and wake-up are the C library's (std::mutex, std::condition_variable), not absl's:
// absl::Mutex keeps process-wide state (each thread's wait identity, from a shared free list)
// that a fork can copy in mid-update by a thread the child does not have, so a child's
// watchdog thread could never wake.
struct CallWatchdog::State {
  explicit State(pid_t owner) : owner(owner) {}

  void Run();
  void Moved(absl::Time expiry);  // a watch's expiry is now this; mu held

  const pid_t owner;  // the process it serves
  std::mutex mu;
  std::condition_variable wake;
  absl::flat_hash_set<Watch*> watches;            // guarded by mu
  absl::Time next_wake = absl::InfiniteFuture();  // guarded by mu
  bool woken = false;                             // guarded by mu
  bool stop = false;                              // guarded by mu
  std::thread thread;                             // started once, right after construction
};

CallWatchdog::~CallWatchdog() {
  State* state = state_.load();
  if (state == nullptr || state->owner != getpid()) return;  // none, or a parent's: left behind
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->stop = true;
  }
  state->wake.notify_all();
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
  std::lock_guard<std::mutex> lock(state->mu);
  state->watches.insert(watch.get());
  state->Moved(watch->expiry());
  return watch;
}

void CallWatchdog::State::Moved(absl::Time expiry) {
  if (expiry >= next_wake) return;  // the thread wakes before it anyway
  next_wake = expiry;
  woken = true;
  wake.notify_one();
}

void CallWatchdog::State::Run() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stop) {
    absl::Time now = Now();
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
    auto awake = [this] { return woken || stop; };
    if (next == absl::InfiniteFuture()) {
      wake.wait(lock, awake);
    } else {
      wake.wait_until(lock, absl::ToChronoTime(next), awake);
    }
  }
}

CallWatchdog::Watch::~Watch() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->watches.erase(this);
}

void CallWatchdog::Watch::Set(absl::Time silent_at, absl::Time until) {
  std::lock_guard<std::mutex> lock(state_->mu);
  silent_at_ = silent_at;
  until_ = std::min(until_, until);
  state_->Moved(expiry());
}

WatchFired CallWatchdog::Watch::fired() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return fired_;
}

}  // namespace kcache::client
