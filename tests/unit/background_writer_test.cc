// The one bounded background writer (core/background_writer.h), on its own: jobs run in the
// order queued on a thread of their own; the job and byte bounds drop what is past them and
// free up as jobs run; AddAlways passes the bounds; Drain waits for what was queued before it;
// destruction drains or abandons as asked. Its users: write_behind_test, shared_tier_test,
// client_object_sharing_test.
#include "core/background_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace kcache {
namespace {

// Records what ran, and holds the writer inside its first job until released.
struct Recorder {
  absl::Mutex mu;
  std::vector<std::string> ran ABSL_GUARDED_BY(mu);
  absl::Notification entered, release;
  bool hold = false;

  void Run(std::string& job) {
    if (hold && !entered.HasBeenNotified()) {
      entered.Notify();
      release.WaitForNotification();
    }
    absl::MutexLock lock(&mu);
    ran.push_back(job);
  }
  std::vector<std::string> Ran() {
    absl::MutexLock lock(&mu);
    return ran;
  }
};

TEST(BackgroundWriterTest, JobsRunInTheOrderQueuedAndDrainWaitsForThem) {
  Recorder recorder;
  BackgroundWriter<std::string> writer({}, AtDestruction::kDrain,
                                       [&](std::string& job) { recorder.Run(job); });
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(writer.Add(std::to_string(i), 1));
  writer.AddAlways("release");
  writer.Drain();
  std::vector<std::string> ran = recorder.Ran();
  ASSERT_EQ(ran.size(), 101u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], std::to_string(i));
  EXPECT_EQ(ran.back(), "release");  // after the writes queued before it
  EXPECT_EQ(writer.jobs(), 0u);
  EXPECT_EQ(writer.bytes(), 0u);
}

TEST(BackgroundWriterTest, TheBoundsDropWhatIsPastThemAndFreeUpAsJobsRun) {
  Recorder recorder;
  recorder.hold = true;
  BackgroundWriter<std::string> writer({.max_jobs = 3, .max_bytes = 100}, AtDestruction::kDrain,
                                       [&](std::string& job) { recorder.Run(job); });
  ASSERT_TRUE(writer.Add("a", 10));
  recorder.entered.WaitForNotification();  // "a" runs (and still counts) until released
  EXPECT_TRUE(writer.Add("b", 60));
  EXPECT_FALSE(writer.Add("too many bytes", 31));  // 10 + 60 + 31 > 100
  EXPECT_FALSE(writer.Add("larger than the bound", 101));
  EXPECT_TRUE(writer.Add("c", 30));
  EXPECT_FALSE(writer.Add("too many jobs", 0));  // a, b, c
  writer.AddAlways("release");                   // never dropped
  EXPECT_EQ(writer.jobs(), 3u);
  EXPECT_EQ(writer.bytes(), 100u);
  recorder.release.Notify();
  writer.Drain();
  EXPECT_EQ(recorder.Ran(), (std::vector<std::string>{"a", "b", "c", "release"}));
  EXPECT_TRUE(writer.Add("d", 100));  // room again
  writer.Drain();
  EXPECT_EQ(recorder.Ran().back(), "d");
}

TEST(BackgroundWriterTest, DestructionDrainsOrAbandonsAsAsked) {
  for (AtDestruction at : {AtDestruction::kDrain, AtDestruction::kAbandon}) {
    Recorder recorder;
    recorder.hold = true;
    std::thread releaser;
    {
      BackgroundWriter<std::string> writer({}, at, [&](std::string& job) { recorder.Run(job); });
      ASSERT_TRUE(writer.Add("running", 1));
      recorder.entered.WaitForNotification();
      ASSERT_TRUE(writer.Add("queued", 1));
      writer.AddAlways("release");
      // Let the running job end only once the destructor has begun (it waits on the thread).
      releaser = std::thread([&] {
        absl::SleepFor(absl::Milliseconds(200));
        recorder.release.Notify();
      });
    }
    releaser.join();
    std::vector<std::string> ran = recorder.Ran();
    if (at == AtDestruction::kDrain) {
      EXPECT_EQ(ran, (std::vector<std::string>{"running", "queued", "release"}));
    } else {
      EXPECT_EQ(ran, (std::vector<std::string>{"running"}));
    }
  }
}

TEST(BackgroundWriterTest, ConcurrentAddsRunEachAcceptedJobOnce) {
  std::atomic<int> ran{0};
  std::atomic<int> accepted{0};
  {
    BackgroundWriter<int> writer({.max_jobs = 8}, AtDestruction::kDrain,
                                 [&](int&) { ran.fetch_add(1); });
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 500; ++i) {
          if (writer.Add(i, 1)) accepted.fetch_add(1);
          if (i % 50 == 0) writer.Drain();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  EXPECT_EQ(ran.load(), accepted.load());
  EXPECT_GT(accepted.load(), 0);
}

}  // namespace
}  // namespace kcache
