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
  using Added = BackgroundCompiles::Added;
  EXPECT_EQ(queue.Add(Job(80), 0), Added::kQueued);
  r.started.WaitForNotification();                   // sm_80 is compiling, out of the queue
  EXPECT_EQ(queue.Add(Job(86), 1), Added::kQueued);  // two wait now: the bound
  EXPECT_EQ(queue.Add(Job(89), 0), Added::kQueued);
  EXPECT_EQ(queue.Add(Job(86), 1), Added::kAlreadyQueued);  // waits already: not counted
  EXPECT_EQ(queue.Add(Job(90), 1), Added::kDropped);        // past the bound: dropped
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesQueued), 3u);
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesDropped), 1u);
  r.release.Notify();
  r.AwaitCompiled(3);
  EXPECT_EQ(queue.Add(Job(90), 1), Added::kQueued);  // room again
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
    EXPECT_EQ(queue.Add(Job(80), 0), BackgroundCompiles::Added::kDropped);
  }  // joined: whatever it was given has run
  absl::MutexLock lock(&r.mu);
  EXPECT_TRUE(r.compiled.empty());
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesQueued), 0u);
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesDropped), 1u);
}

// A queue with a per-client bound counts in its own statistics: one client past its share is
// dropped while another still queues; a client's share comes back as its compiles leave the queue.
TEST(BackgroundCompilesTest, OneClientGetsAtMostItsShareOfTheQueue) {
  Statistics stats;
  Recorder r;
  using Added = BackgroundCompiles::Added;
  BackgroundCompiles queue(/*bound=*/8, r.Compile(), &stats,
                           {Statistic::kPtxBuildsQueued, Statistic::kPtxBuildsDropped},
                           /*per_client=*/2);
  auto from = [](const std::string& client, int arch) {
    CompileJob job = Job(arch);
    job.demand.client = client;
    return job;
  };
  EXPECT_EQ(queue.Add(from("pod-a", 75), 0), Added::kQueued);
  r.started.WaitForNotification();  // sm_75 is compiling: pod-a has nothing queued
  EXPECT_EQ(queue.Add(from("pod-a", 80), 0), Added::kQueued);
  EXPECT_EQ(queue.Add(from("pod-a", 86), 0), Added::kQueued);
  EXPECT_EQ(queue.Add(from("pod-a", 89), 0), Added::kClientBound);
  EXPECT_EQ(queue.Add(from("pod-b", 89), 0), Added::kQueued);
  EXPECT_EQ(stats.Get(Statistic::kPtxBuildsQueued), 4u);
  EXPECT_EQ(stats.Get(Statistic::kPtxBuildsDropped), 1u);
  EXPECT_EQ(stats.Get(Statistic::kBackgroundCompilesQueued), 0u);
  r.release.Notify();
  r.AwaitCompiled(4);
  EXPECT_EQ(queue.Add(from("pod-a", 90), 0), Added::kQueued);  // its share is back
  r.AwaitCompiled(5);
  absl::MutexLock lock(&r.mu);
  EXPECT_EQ(r.compiled.back(), "90/0/(background)/1");
}

}  // namespace
}  // namespace kcache
