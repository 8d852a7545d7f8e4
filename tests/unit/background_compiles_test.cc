// daemon/cache/background_compiles.h: compiles left for after the answer run one at a time in
// the order queued, each always wanted, within a bound (past it dropped), each counted.
#include "daemon/cache/background_compiles.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/cache/statistics.h"

namespace kcache {
namespace {

CompileJob Job(int arch) {
  CompileJob job;
  job.spec.source = absl::StrCat("// sm_", arch);
  job.target = Target{TargetKind::kSass, Sm{arch / 10, arch % 10}};
  job.demand = CompileDemand{"worker-1", [] { return false; }, nullptr};  // given up
  return job;
}

// Records each compile as "<arch>/<toolkit>/<client>/<always wanted>"; the first compile
// tells `started` and waits for `release`.
struct Recorder {
  absl::Mutex mu;
  std::vector<std::string> compiled ABSL_GUARDED_BY(mu);
  absl::Notification started;
  absl::Notification release;

  BackgroundCompiles::CompileFn Compile() {
    return [this](const CompileJob& job, size_t toolkit) {
      if (!started.HasBeenNotified()) started.Notify();
      release.WaitForNotification();
      absl::MutexLock lock(&mu);
      compiled.push_back(absl::StrCat(job.target.sm.arch(), "/", toolkit, "/", job.demand.client,
                                      "/", job.demand.wanted == nullptr));
    };
  }
  void AwaitCompiled(size_t n) {
    absl::MutexLock lock(&mu);
    auto done = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return compiled.size() >= n; };
    mu.Await(absl::Condition(&done));
  }
};

TEST(BackgroundCompilesTest, CompilesInOrderAlwaysWantedWithinTheBoundAndCountsEach) {
  Statistics stats;
  Recorder r;
  BackgroundCompiles queue(/*bound=*/2, r.Compile(), &stats);
  EXPECT_TRUE(queue.Add(Job(80), 0));
  r.started.WaitForNotification();     // sm_80 is compiling, out of the queue
  EXPECT_TRUE(queue.Add(Job(86), 1));  // two wait now: the bound
  EXPECT_TRUE(queue.Add(Job(89), 0));
  EXPECT_FALSE(queue.Add(Job(90), 1));  // past the bound: dropped
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesQueued), 3u);
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesDropped), 1u);
  r.release.Notify();
  r.AwaitCompiled(3);
  EXPECT_TRUE(queue.Add(Job(90), 1));  // room again
  r.AwaitCompiled(4);
  absl::MutexLock lock(&r.mu);
  EXPECT_EQ(r.compiled, (std::vector<std::string>{"80/0/(background)/1", "86/1/(background)/1",
                                                  "89/0/(background)/1", "90/1/(background)/1"}));
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesQueued), 4u);
}

TEST(BackgroundCompilesTest, AZeroBoundDropsEveryCompile) {
  Statistics stats;
  Recorder r;
  r.release.Notify();
  {
    BackgroundCompiles queue(/*bound=*/0, r.Compile(), &stats);
    EXPECT_FALSE(queue.Add(Job(80), 0));
  }  // joined: whatever it was given has run
  absl::MutexLock lock(&r.mu);
  EXPECT_TRUE(r.compiled.empty());
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesQueued), 0u);
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesDropped), 1u);
}

}  // namespace
}  // namespace kcache
