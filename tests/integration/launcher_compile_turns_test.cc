// One compile per launcher miss (docs/torch-extensions.md, "One compile per miss"): real
// kcacheds on temp sockets, a real six-node Redis Cluster for the fleet, real c++ behind a
// compiler that stops at a gate (tests/testutil/gated_compiler.h), so a test holds one
// launcher's compile while another launcher misses the same command.
//
// Launchers of one kcached, and of kcacheds sharing client objects through one Redis Cluster,
// compile a command once: the other waits, says so, and is served byte-identical output. A
// holder killed, a holder's kcached killed (its fleet lease expires), a failed compile, an entry
// whose headers differ from the waiter's: the waiter compiles itself, never served wrongly.
// Without --share-client-objects pods do not wait on each other; a store directory takes no
// turns. Skips without c++, redis-cli (and redis-server for the fleet).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testutil/gated_compiler.h"

namespace kcache {
namespace {

using testing::DaemonProcess;
using testing::RunResult;

class LauncherCompileTurnsTest : public testing::GatedLaunchTest {
 protected:
  // Starts the holder's compile through `holder_pod` and, once it runs, the waiter's through
  // `waiter_pod`, which is seen waiting; then lets the compile go. Both launchers have 10 s
  // for kcached (KCACHE_TIMEOUT_MS), not the default second, so that on a loaded machine the
  // waiter's lookups after the wait and its put are not cut short (what these tests count);
  // an `extra` naming KCACHE_TIMEOUT_MS comes later and wins.
  void HolderThenWaiter(DaemonProcess& holder_pod, DaemonProcess& waiter_pod,
                        const std::string& holder_command, const std::string& waiter_command,
                        const std::string& waiter_extra = "",
                        const std::string& holder_extra = "") {
    constexpr char kBudget[] = "KCACHE_TIMEOUT_MS=10000 ";
    holder_ = Launch(holder_pod, "b1", holder_command, absl::StrCat(kBudget, holder_extra));
    ASSERT_TRUE(gate_->WaitStopped(1)) << "the holder's compile never started";
    waiter_ = Launch(waiter_pod, "b2", waiter_command, absl::StrCat(kBudget, waiter_extra));
    ASSERT_EQ(WaitCounter(waiter_pod, "objects.turn_waits", 1), 1) << waiter_pod.Log();
  }

  std::future<RunResult> holder_, waiter_;
};

bool Says(const RunResult& result, const std::string& text) {
  return testing::Contains(result.output, text);
}

TEST_F(LauncherCompileTurnsTest, TwoLaunchersOfOneKcachedCompileOnce) {
  DaemonProcess& pod = StartDaemon({});
  // The waiter's budget for kcached is far shorter than its wait: a wait is no hang.
  HolderThenWaiter(pod, pod, Compile(), Compile(), "KCACHE_TIMEOUT_MS=300");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  gate_->Open();
  RunResult holder = holder_.get(), waiter = waiter_.get();
  ASSERT_EQ(holder.exit_code, 0) << holder.output;
  ASSERT_EQ(waiter.exit_code, 0) << waiter.output;
  EXPECT_TRUE(Says(holder, "kcache: stored")) << holder.output;
  EXPECT_TRUE(Says(waiter, "waiting for the compile of kcache pid ")) << waiter.output;
  EXPECT_TRUE(Says(waiter, "served from the compile of kcache pid ")) << waiter.output;
  EXPECT_FALSE(Says(waiter, "did not answer") || Says(waiter, "went silent")) << waiter.output;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  EXPECT_EQ(Counter(pod, "objects.stored"), 1);
  EXPECT_EQ(Counter(pod, "objects.turns_held"), 1);
  EXPECT_EQ(Counter(pod, "objects.turn_waits_served"), 1);
  EXPECT_EQ(Counter(pod, "objects.turn_calls"), 0);
}

// The holder's compile outlasts its fleet lease several times over: renewed while it runs, the
// lease keeps the other pod waiting for it.
TEST_F(LauncherCompileTurnsTest, TwoPodsSharingClientObjectsCompileOnce) {
  if (!StartFleet()) return;
  DaemonProcess& a = StartOnCluster(true, {"--shared-lease-seconds", "1"});
  DaemonProcess& b = StartOnCluster(true, {"--shared-lease-seconds", "1"});
  HolderThenWaiter(a, b, Compile(), Compile());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  gate_->Open();
  RunResult holder = holder_.get(), waiter = waiter_.get();
  ASSERT_EQ(holder.exit_code, 0) << holder.output;
  ASSERT_EQ(waiter.exit_code, 0) << waiter.output << b.Log();
  EXPECT_TRUE(Says(waiter, absl::StrCat("waiting for the compile of the kcached on ")))
      << waiter.output;
  EXPECT_TRUE(Says(waiter, absl::StrCat("(pid ", a.pid(), ")"))) << waiter.output;
  EXPECT_TRUE(Says(waiter, "served from the compile of the kcached on ")) << waiter.output;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  EXPECT_EQ(Counter(a, "objects.stored"), 1);
  EXPECT_EQ(Counter(b, "objects.stored"), 0);
  EXPECT_EQ(Counter(a, "objects.turns_held"), 1);
  EXPECT_EQ(Counter(b, "objects.turn_waits_served"), 1);
}

TEST_F(LauncherCompileTurnsTest, AHolderKilledMidCompileLeavesTheTurnToTheWaiter) {
  DaemonProcess& pod = StartDaemon({});
  HolderThenWaiter(pod, pod, Compile(), Compile());
  std::vector<pid_t> stopped = gate_->Stopped();
  ASSERT_EQ(stopped.size(), 1u);
  pid_t launcher = testing::GatedCompiler::LauncherOf(stopped[0]);
  ASSERT_GT(launcher, 1);
  kill(launcher, SIGKILL);
  kill(stopped[0], SIGKILL);
  EXPECT_NE(holder_.get().exit_code, 0);
  gate_->Open();
  RunResult waiter = waiter_.get();
  ASSERT_EQ(waiter.exit_code, 0) << waiter.output;
  EXPECT_TRUE(Says(waiter, "went away before its compile ended")) << waiter.output;
  EXPECT_TRUE(Says(waiter, "kcache: stored")) << waiter.output;
  EXPECT_EQ(Counter(pod, "objects.turn_waits_released"), 1);
  EXPECT_EQ(Counter(pod, "objects.stored"), 1);
}

// The holder's kcached dies with the compile: nothing releases its fleet lease, which expires
// after --shared-lease-seconds; the waiter then compiles, far sooner than its wait's bound.
TEST_F(LauncherCompileTurnsTest, AHoldersKcachedKilledLetsTheFleetLeaseExpire) {
  if (!StartFleet()) return;
  std::vector<std::string> flags = {"--shared-lease-seconds", "2", "--object-wait-seconds", "120"};
  DaemonProcess& a = StartOnCluster(true, flags);
  DaemonProcess& b = StartOnCluster(true, flags);
  HolderThenWaiter(a, b, Compile(), Compile());
  auto killed = std::chrono::steady_clock::now();
  a.Kill(SIGKILL);
  gate_->Open();
  RunResult waiter = waiter_.get();
  auto took = std::chrono::steady_clock::now() - killed;
  ASSERT_EQ(waiter.exit_code, 0) << waiter.output;
  EXPECT_TRUE(Says(waiter, "gave its lease up")) << waiter.output;
  EXPECT_TRUE(Says(waiter, "kcache: stored")) << waiter.output;
  EXPECT_LT(took, std::chrono::seconds(60)) << "the waiter waited out its bound";
  EXPECT_EQ(Counter(b, "objects.turn_waits_released"), 1);
  EXPECT_EQ(Counter(b, "objects.stored"), 1);
  holder_.get();
}

TEST_F(LauncherCompileTurnsTest, AHoldersFailedCompileIsCompiledAgainByTheWaiterWhoFailsTheSame) {
  std::string bad = tmp_.Write("src/bad.cpp", "int answer() { return missing; }\n");
  DaemonProcess& pod = StartDaemon({});
  HolderThenWaiter(pod, pod, Compile(bad), Compile(bad));
  gate_->Open();
  RunResult holder = holder_.get(), waiter = waiter_.get();
  EXPECT_EQ(holder.exit_code, 1) << holder.output;
  EXPECT_EQ(waiter.exit_code, 1) << waiter.output;
  EXPECT_TRUE(Says(waiter, "failed (exit code 1)")) << waiter.output;
  EXPECT_TRUE(Says(waiter, "missing")) << waiter.output;  // its own compiler's error
  EXPECT_EQ(Counter(pod, "objects.turn_waits_released"), 1);
  EXPECT_EQ(Counter(pod, "objects.stored"), 0);
}

// Two trees at different paths (base directories: the same key1) whose header differs: the
// waiter's lookup finds the holder's entry not matching its files and compiles its own.
TEST_F(LauncherCompileTurnsTest, APeersEntryForOtherHeadersIsNotServedToTheWaiter) {
  if (!StartFleet()) return;
  DaemonProcess& a = StartOnCluster(true);
  DaemonProcess& b = StartOnCluster(true);
  std::vector<std::string> commands;
  for (const char* tree : {"one", "two"}) {
    tmp_.Write(absl::StrCat(tree, "/src/answer.cpp"),
               "#include \"config.h\"\nint answer() { return ANSWER; }\n");
    tmp_.Write(absl::StrCat(tree, "/include/config.h"),
               absl::StrCat("#define ANSWER ", tree == std::string("one") ? 42 : 43, "\n"));
    commands.push_back(Compile(tmp_ / absl::StrCat(tree, "/src/answer.cpp"),
                               absl::StrCat("-I", tmp_ / absl::StrCat(tree, "/include"))));
  }
  HolderThenWaiter(a, b, commands[0], commands[1], absl::StrCat("KCACHE_BASEDIR=", tmp_ / "two"),
                   absl::StrCat("KCACHE_BASEDIR=", tmp_ / "one"));
  gate_->Open();
  RunResult holder = holder_.get(), waiter = waiter_.get();
  ASSERT_EQ(holder.exit_code, 0) << holder.output;
  ASSERT_EQ(waiter.exit_code, 0) << waiter.output;
  EXPECT_TRUE(Says(waiter, "does not match this machine's files")) << waiter.output;
  EXPECT_FALSE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  // The waiter's object is its own tree's, as c++ alone makes it.
  std::filesystem::create_directories(tmp_ / "plain");
  ASSERT_EQ(testing::Run(absl::StrCat("cd ", tmp_ / "plain", " && c++ -O2 -I", tmp_ / "two/include",
                                      " -c ", tmp_ / "two/src/answer.cpp", " -o answer.o"))
                .exit_code,
            0);
  EXPECT_TRUE(testing::SameFile(tmp_ / "plain/answer.o", tmp_ / "b2/answer.o"));
  EXPECT_EQ(Counter(b, "objects.turn_waits_not_served"), 1);
  EXPECT_EQ(Counter(b, "objects.stored"), 1);
}

TEST_F(LauncherCompileTurnsTest, PodsNotSharingClientObjectsDoNotWaitOnEachOther) {
  if (!StartFleet()) return;
  DaemonProcess& a = StartOnCluster(false);
  DaemonProcess& b = StartOnCluster(false);
  holder_ = Launch(a, "b1", Compile());
  waiter_ = Launch(b, "b2", Compile());
  ASSERT_TRUE(gate_->WaitStopped(2)) << "both compile at once";
  std::string keys =
      testing::Run(absl::StrCat("redis-cli --cluster call 127.0.0.1:", cluster_.ports()[0],
                                " KEYS 'kcache:obj:*'"))
          .output;
  EXPECT_FALSE(testing::Contains(keys, ":turn")) << keys;
  gate_->Open();
  RunResult holder = holder_.get(), waiter = waiter_.get();
  ASSERT_EQ(holder.exit_code, 0) << holder.output;
  ASSERT_EQ(waiter.exit_code, 0) << waiter.output;
  EXPECT_FALSE(Says(holder, "waiting for") || Says(waiter, "waiting for")) << waiter.output;
  EXPECT_EQ(Counter(a, "objects.turn_waits") + Counter(b, "objects.turn_waits"), 0);
  EXPECT_EQ(Counter(a, "objects.stored") + Counter(b, "objects.stored"), 2);
}

TEST_F(LauncherCompileTurnsTest, AStoreDirectoryTakesNoTurns) {
  std::vector<std::future<RunResult>> builds;
  for (const char* build : {"b1", "b2"}) {
    std::filesystem::create_directories(tmp_ / build);
    std::string dir = tmp_ / build, command = Compile();
    builds.push_back(std::async(
        std::launch::async, [this, dir, command] { return testing::RunIn(dir, env_, command); }));
  }
  ASSERT_TRUE(gate_->WaitStopped(2)) << "both compile at once";
  gate_->Open();
  for (std::future<RunResult>& build : builds) {
    RunResult result = build.get();
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_FALSE(Says(result, "waiting for")) << result.output;
  }
}

}  // namespace
}  // namespace kcache
