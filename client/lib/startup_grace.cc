// StartupGrace: a call that finds no daemon polls for it every 100 ms while the grace lasts.
#include "client/lib/startup_grace.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "client/lib/clock.h"

namespace kcache::client {

void StartupGrace::Contacted() {
  absl::MutexLock lock(&mu_);
  over_ = true;
}

bool StartupGrace::WaitAgain() {
  constexpr absl::Duration kPoll = absl::Milliseconds(100);
  absl::Duration pause;
  {
    absl::MutexLock lock(&mu_);
    if (over_) return false;
    absl::Time now = Now();
    if (!until_) until_ = now + grace_;
    if (now >= *until_) {
      over_ = true;
      return false;
    }
    pause = std::min(kPoll, *until_ - now);
  }
  absl::SleepFor(pause);
  return true;
}

}  // namespace kcache::client
