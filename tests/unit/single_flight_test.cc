// SingleFlight on its own: concurrent callers of one key share one run and its result (or its
// error); different keys run independently; a later caller starts a new flight.
#include "daemon/cache/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace kcache {
namespace {

using Result = absl::StatusOr<std::shared_ptr<const std::string>>;

// Waits (bounded) until `n` callers are waiting on `key`'s flight.
void AwaitWaiters(const SingleFlight<std::string, Result>& flight, const std::string& key, int n) {
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (flight.waiters(key) < n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(flight.waiters(key), n);
}

TEST(SingleFlightTest, ConcurrentCallersShareOneRunAndItsResult) {
  SingleFlight<std::string, Result> flight;
  std::atomic<int> runs{0};
  absl::Notification release;
  constexpr int kThreads = 16;
  std::vector<Result> results(kThreads);
  // One char per thread, not vector<bool>: its bits share words, and the threads write at once.
  std::vector<char> waited(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      bool w = false;
      results[i] = flight.Do(
          "k",
          [&]() -> Result {
            ++runs;
            release.WaitForNotification();  // hold the flight open until all have joined
            return std::make_shared<const std::string>("compiled");
          },
          &w);
      waited[i] = w;
    });
  }
  AwaitWaiters(flight, "k", kThreads - 1);
  release.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(runs.load(), 1);
  int leaders = 0;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(results[i].ok());
    EXPECT_EQ(results[i]->get(), results[0]->get());  // one shared object
    EXPECT_EQ(**results[i], "compiled");
    leaders += waited[i] ? 0 : 1;
  }
  EXPECT_EQ(leaders, 1);
  EXPECT_EQ(flight.in_flight(), 0u);
}

TEST(SingleFlightTest, AnErrorReachesEveryWaiter) {
  SingleFlight<std::string, Result> flight;
  absl::Notification release;
  std::vector<Result> results(4, Result(nullptr));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      results[i] = flight.Do("k", [&]() -> Result {
        release.WaitForNotification();
        return absl::AbortedError("compile error: log here");
      });
    });
  }
  AwaitWaiters(flight, "k", 3);
  release.Notify();
  for (std::thread& t : threads) t.join();
  for (const Result& r : results) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
    EXPECT_EQ(r.status().message(), "compile error: log here");
  }
}

TEST(SingleFlightTest, DifferentKeysDoNotWaitForEachOther) {
  SingleFlight<std::string, Result> flight;
  absl::Notification release_a;
  std::thread a([&] {
    Result r = flight.Do("a", [&]() -> Result {
      release_a.WaitForNotification();
      return std::make_shared<const std::string>("a");
    });
    EXPECT_EQ(**r, "a");
  });
  // While "a" is held open, "b" runs and returns on its own.
  bool waited = true;
  Result b = flight.Do(
      "b", [] { return Result(std::make_shared<const std::string>("b")); }, &waited);
  EXPECT_FALSE(waited);
  EXPECT_EQ(**b, "b");
  release_a.Notify();
  a.join();
}

TEST(SingleFlightTest, ACallerAfterTheFlightEndedRunsAgain) {
  SingleFlight<std::string, Result> flight;
  int runs = 0;
  auto work = [&] {
    ++runs;
    return Result(std::make_shared<const std::string>("x"));
  };
  Result first = flight.Do("k", work);
  Result second = flight.Do("k", work);
  EXPECT_EQ(runs, 2);
  EXPECT_NE(first->get(), second->get());  // two runs, two results
  EXPECT_EQ(flight.in_flight(), 0u);
}

}  // namespace
}  // namespace kcache
