// Compile capacity is fair (docs/compile-workers.md, "Queueing"), against a real kcached with
// the fault-injecting worker (KCACHE_TEST_HANG spins until the wall-clock limit kills it):
// a miss whose caller gave up leaves the queue without compiling; a client whose compiles
// hold the workers does not get the next free one before another client that waits; a
// kernel stopped by a limit is not compiled again for a while.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/http.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/tree_paths.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::CallResolve;
using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::ResolveOutcome;
using ::kcache::testing::ResolveSpec;
using ::kcache::testing::StatCounter;
using ::kcache::testing::WaitFor;
using ::kcache::testing::WireSpec;
using Clock = std::chrono::steady_clock;

// A kernel that keeps its worker busy until the wall-clock limit; `n` makes each distinct.
v1::ResolveRequest Bomb(int n, const std::string& client) {
  v1::ResolveRequest request = ResolveSpec(
      WireSpec(absl::StrCat("bomb", n), absl::StrCat("// KCACHE_TEST_HANG ", n, "\n")), 8, 9);
  request.set_client(client);
  return request;
}

v1::ResolveRequest Small(int n, const std::string& client) {
  v1::ResolveRequest request =
      ResolveSpec(WireSpec(absl::StrCat("small", n),
                           absl::StrCat(::kcache::testing::kSaxpySource, "// variant ", n, "\n")),
                  8, 9);
  request.set_client(client);
  return request;
}

class CompileFairnessTest : public ::testing::Test {
 protected:
  void StartDaemon(int workers, int wall_seconds) {
    daemon_.options().extra_flags = {
        "--compile-worker",
        testing::BinaryPath("engine/workers/kcache-compile-worker-faulty"),
        "--compile-workers",
        std::to_string(workers),
        "--compile-timeout-seconds",
        std::to_string(wall_seconds),
        "--probe-port",
        std::to_string(port_)};
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    stub_ = ::kcache::testing::NewStub(daemon_.address());
  }

  // Waits (up to 30 s) until the counter reaches `value`; its last value.
  uint64_t AwaitCounter(const std::string& name, uint64_t value) {
    uint64_t now = 0;
    WaitFor([&] { return (now = StatCounter(*stub_, name)) >= value; }, std::chrono::seconds(30));
    return now;
  }

  // Waits until kcached is answering `calls` gRPC calls (its /metrics gauge): each call the test
  // started has reached the daemon (its compile may not be queued yet).
  void AwaitCallsInFlight(int calls) {
    ASSERT_TRUE(WaitFor([&] {
      return ::kcache::testing::ScrapeSample(port_, "kcache_calls_in_flight") >= calls;
    })) << daemon_.Log();
  }

  // Sends `request` on a thread and waits until kcached says its compile runs in the worker
  // (ResolveProgress stage COMPILING): from then on it holds the worker. A call merely in
  // flight may not have reached the worker yet, and a later one could take it first.
  std::thread HoldTheWorker(v1::ResolveRequest request) {
    request.set_want_progress(true);
    auto compiling = std::make_shared<absl::Notification>();
    std::thread call([this, request, compiling] {
      CallResolve(
          *stub_, request, std::chrono::seconds(120), [&](const v1::ResolveProgress& progress) {
            if (progress.stage() == v1::COMPILE_STAGE_COMPILING && !compiling->HasBeenNotified()) {
              compiling->Notify();
            }
          });
    });
    EXPECT_TRUE(compiling->WaitForNotificationWithTimeout(absl::Seconds(30))) << daemon_.Log();
    return call;
  }

  int port_ = ::kcache::testing::FreePort();
  DaemonProcess daemon_;
  std::unique_ptr<v1::KernelCache::Stub> stub_;
};

// 20 misses whose callers gave up while they waited behind a busy worker: none compiles.
TEST_F(CompileFairnessTest, MissesNobodyWaitsForLeaveTheQueue) {
  StartDaemon(/*workers=*/1, /*wall_seconds=*/4);
  std::thread bomb = HoldTheWorker(Bomb(0, "bomber"));
  std::vector<std::thread> impatient;
  for (int i = 0; i < 20; ++i) {
    impatient.emplace_back([&, i] {
      ResolveOutcome out = CallResolve(*stub_, Small(i, "impatient"), std::chrono::seconds(1));
      EXPECT_EQ(out.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
          << out.status.error_message();
    });
  }
  for (std::thread& t : impatient) t.join();
  EXPECT_EQ(AwaitCounter("compile.dropped", 20), 20u);
  bomb.join();
  EXPECT_EQ(StatCounter(*stub_, "compile.runs"), 1u) << "only the bomb ran";
  // The next miss someone waits for compiles as usual.
  ResolveOutcome patient = CallResolve(*stub_, Small(99, "patient"));
  EXPECT_TRUE(patient.status.ok()) << patient.status.error_message();
}

// A caller that gave up asks again half a second later (a retry): its compile was still in the
// queue, and the retry joins it instead of it being dropped and queued anew.
TEST_F(CompileFairnessTest, AMissItsCallerAsksAgainForStaysQueued) {
  StartDaemon(/*workers=*/1, /*wall_seconds=*/4);
  std::thread bomb = HoldTheWorker(Bomb(0, "bomber"));
  ResolveOutcome gave_up = CallResolve(*stub_, Small(0, "retrier"), std::chrono::seconds(1));
  EXPECT_EQ(gave_up.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ResolveOutcome retry = CallResolve(*stub_, Small(0, "retrier"));
  EXPECT_TRUE(retry.status.ok()) << retry.status.error_message();
  EXPECT_EQ(StatCounter(*stub_, "compile.dropped"), 0u);
  bomb.join();
}

// One worker, held by a bomb; the bomber queues a second bomb, then another client a small
// miss. When the worker frees, the small miss goes first: it is answered before the second
// bomb has even started (FIFO would have made it wait a whole wall-clock limit more).
TEST_F(CompileFairnessTest, TheNextFreeWorkerGoesToAClientNotYetServed) {
  StartDaemon(/*workers=*/1, /*wall_seconds=*/3);
  std::atomic<int64_t> small_done{0}, second_bomb_done{0};
  auto since = [start = Clock::now()] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  };
  std::thread first = HoldTheWorker(Bomb(1, "bomber"));
  std::thread second([&] {
    CallResolve(*stub_, Bomb(2, "bomber"));
    second_bomb_done = since();
  });
  AwaitCallsInFlight(2);  // the second bomb reached kcached: queued, or about to be
  ResolveOutcome small = CallResolve(*stub_, Small(1, "victim"));
  small_done = since();
  EXPECT_TRUE(small.status.ok()) << small.status.error_message();
  first.join();
  second.join();
  EXPECT_LT(small_done.load(), second_bomb_done.load())
      << "the victim waited behind the bomber's second bomb";
}

// A kernel stopped by the wall-clock limit answers at once the next time, saying so.
TEST_F(CompileFairnessTest, AKernelStoppedByALimitIsNotCompiledAgainForAWhile) {
  StartDaemon(/*workers=*/1, /*wall_seconds=*/1);
  ResolveOutcome first = CallResolve(*stub_, Bomb(3, "bomber"));
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << first.status.error_message();
  ResolveOutcome again = CallResolve(*stub_, Bomb(3, "bomber"));
  EXPECT_EQ(again.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Contains(again.status.error_message(), "not compiled again until"))
      << again.status.error_message();
  EXPECT_EQ(StatCounter(*stub_, "compile.limit_skips"), 1u);
  EXPECT_EQ(StatCounter(*stub_, "compile.limit_stops"), 1u);
}

}  // namespace
}  // namespace kcache
