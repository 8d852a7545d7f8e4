// How long libkcache waits: StartupGrace (for a kcached not there yet) and CallWatchdog (which
// gives up on a silent call, or one past its whole limit).
#include <grpcpp/client_context.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "client/lib/call_watchdog.h"
#include "client/lib/clock.h"
#include "client/lib/startup_grace.h"
#include "kcache/kcache.h"

namespace kcache::client {
namespace {

// Polls until the grace says stop; how many times it said "again".
int Polls(StartupGrace& grace) {
  int polls = 0;
  while (polls < 1000 && grace.WaitAgain()) ++polls;
  return polls;
}

TEST(StartupGraceTest, WaitsForAnAbsentDaemonOnceThenNeverAgain) {
  StartupGrace grace(absl::Milliseconds(300));
  int polls = Polls(grace);
  EXPECT_GE(polls, 1);
  EXPECT_LT(polls, 1000) << "the grace never ran out";
  EXPECT_EQ(Polls(grace), 0) << "spent once per client";
}

TEST(StartupGraceTest, EndsAtTheFirstContact) {
  StartupGrace grace(absl::Seconds(60));
  EXPECT_TRUE(grace.WaitAgain());
  grace.Contacted();
  EXPECT_FALSE(grace.WaitAgain());
}

TEST(StartupGraceTest, ZeroDoesNotWait) {
  StartupGrace none(absl::ZeroDuration());
  EXPECT_FALSE(none.WaitAgain());
}

TEST(StartupGraceTest, TheEnvironmentSetsTheDefault) {
  EXPECT_EQ(DefaultStartupGrace(), absl::Seconds(5));
  for (auto [text, grace] : {std::pair<const char*, absl::Duration>{"0", absl::ZeroDuration()},
                             {"2.5", absl::Milliseconds(2500)},
                             {"500ms", absl::Milliseconds(500)},
                             {"10s", absl::Seconds(10)},
                             {"soon", absl::Seconds(-1)},
                             {"-3", absl::Seconds(-1)}}) {
    setenv("KCACHE_STARTUP_GRACE", text, 1);
    EXPECT_EQ(DefaultStartupGrace(), grace) << text;
  }
  ClientOptions options;  // "-3": refused, naming the variable
  options.address = "unix:///nonexistent.sock";
  absl::StatusOr<std::unique_ptr<Client>> refused = Client::Connect(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("KCACHE_STARTUP_GRACE"), absl::string_view::npos);
  unsetenv("KCACHE_STARTUP_GRACE");
}

// Waits (up to 10 s) until the watch fired; how.
WatchFired AwaitFired(CallWatchdog::Watch& watch) {
  for (int i = 0; i < 1000 && watch.fired() == WatchFired::kNo; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  return watch.fired();
}

TEST(CallWatchdogTest, GivesUpOnASilentCall) {
  CallWatchdog dog;
  grpc::ClientContext context;
  auto watch = dog.Start(&context, absl::Now() + absl::Milliseconds(50), absl::InfiniteFuture());
  EXPECT_EQ(AwaitFired(*watch), WatchFired::kSilent);
}

TEST(CallWatchdogTest, GivesUpAtTheWholeLimitHoweverMuchTheCallHears) {
  CallWatchdog dog;
  grpc::ClientContext context;
  absl::Time until = absl::Now() + absl::Milliseconds(300);
  auto watch = dog.Start(&context, absl::Now() + absl::Seconds(60), until);
  while (absl::Now() < until - absl::Milliseconds(50)) {
    watch->Set(absl::Now() + absl::Seconds(60), absl::InfiniteFuture());
    EXPECT_EQ(watch->fired(), WatchFired::kNo);
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(AwaitFired(*watch), WatchFired::kOverLimit);
}

TEST(CallWatchdogTest, ACallThatHearsInTimeIsLeftAlone) {
  CallWatchdog dog;
  grpc::ClientContext context;
  auto watch = dog.Start(&context, absl::Now() + absl::Seconds(60), absl::InfiniteFuture());
  grpc::ClientContext other;
  auto silent = dog.Start(&other, absl::Now() + absl::Milliseconds(50), absl::InfiniteFuture());
  EXPECT_EQ(AwaitFired(*silent), WatchFired::kSilent);
  EXPECT_EQ(watch->fired(), WatchFired::kNo);
}

// The parent's thread is not in a forked child: the child's calls get a thread of their own,
// and it wakes however busy the parent's thread was at the fork (each round forks just as a new
// watch, due sooner than the last, wakes it).
TEST(CallWatchdogTest, AForkedChildGetsAThreadOfItsOwn) {
#if defined(__SANITIZE_ADDRESS__)
  // GCC 12's AddressSanitizer runtime takes no lock around fork(): a child forked while another
  // thread (the watchdog's, gRPC's) was inside its allocator inherits that allocator lock held,
  // and its new thread waits on it forever. glibc's malloc does not do this.
  GTEST_SKIP() << "a forked child's allocator is not usable under ASan; runs in the plain build";
#endif
  CallWatchdog dog;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<CallWatchdog::Watch>> watches;
  for (int round = 0; round < 20; ++round) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    watches.push_back(dog.Start(contexts.back().get(),
                                Now() + absl::Seconds(60) - absl::Milliseconds(round),
                                absl::InfiniteFuture()));
    pid_t child = fork();
    if (child == 0) {
      grpc::ClientContext mine;
      auto silent = dog.Start(&mine, Now() + absl::Milliseconds(20), absl::InfiniteFuture());
      _exit(AwaitFired(*silent) == WatchFired::kSilent ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "round " << round << ": " << status;
  }
  for (auto& watch : watches) EXPECT_EQ(watch->fired(), WatchFired::kNo);
}

}  // namespace
}  // namespace kcache::client
