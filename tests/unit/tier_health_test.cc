// The one rule for a failing tier (core/tier_health.h), on its own: off for the initial
// backoff after a failure, the backoff doubling while it keeps failing up to its bound, reset
// by a success; a failure of a call that started before the switch-off is no new switch-off.
#include "core/tier_health.h"

#include <gtest/gtest.h>

namespace kcache {
namespace {

TEST(TierHealthTest, AFailureSwitchesTheTierOffForTheInitialBackoff) {
  TierHealth health(absl::Seconds(5), absl::Minutes(1));
  absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(health.Available(t0));
  EXPECT_TRUE(health.RecordFailure(t0));
  EXPECT_FALSE(health.Available(t0 + absl::Seconds(4)));
  EXPECT_TRUE(health.Available(t0 + absl::Seconds(5)));
}

TEST(TierHealthTest, TheBackoffDoublesWhileItKeepsFailingUpToItsBound) {
  TierHealth health(absl::Seconds(5), absl::Seconds(30));
  absl::Time now = absl::FromUnixSeconds(1000);
  for (int seconds : {5, 10, 20, 30, 30}) {
    ASSERT_TRUE(health.RecordFailure(now));
    EXPECT_FALSE(health.Available(now + absl::Seconds(seconds) - absl::Milliseconds(1))) << seconds;
    EXPECT_TRUE(health.Available(now + absl::Seconds(seconds))) << seconds;
    now += absl::Seconds(seconds);  // tried again once its time off is over, and fails again
  }
}

TEST(TierHealthTest, ASuccessResetsTheBackoff) {
  TierHealth health(absl::Seconds(5), absl::Minutes(1));
  absl::Time now = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(health.RecordFailure(now));
  now += absl::Seconds(5);
  ASSERT_TRUE(health.RecordFailure(now));  // the next time off is 10 s
  now += absl::Seconds(10);
  health.RecordSuccess();
  ASSERT_TRUE(health.RecordFailure(now));
  EXPECT_TRUE(health.Available(now + absl::Seconds(5)));  // 5 s again, not 20
}

TEST(TierHealthTest, AFailureWhileOffIsNoNewSwitchOffAndDoesNotExtendIt) {
  TierHealth health(absl::Seconds(5), absl::Minutes(1));
  absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(health.RecordFailure(t0));
  EXPECT_FALSE(health.RecordFailure(t0 + absl::Seconds(1)));  // a call started before it
  EXPECT_TRUE(health.Available(t0 + absl::Seconds(5)));
}

}  // namespace
}  // namespace kcache
