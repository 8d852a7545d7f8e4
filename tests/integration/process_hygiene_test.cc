// kcached as a careless operator or a stray signal finds it: signals it does not stop for,
// the socket folder's mode under any umask, and the status a call cut off by shutdown gets.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/run.h"
#include "tests/testutil/tree_paths.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::CheckHealth;
using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::HealthStatus;
using ::kcache::testing::WaitFor;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

TEST(ProcessHygieneTest, HangupAndUserSignalsAreLoggedAndIgnored) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit"};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  for (int signo : {SIGHUP, SIGUSR1, SIGUSR2}) daemon.Kill(signo);
  // Each is logged as it is read; wait for the last line rather than a fixed time.
  WaitFor([&] { return Contains(daemon.Log(), "received SIGUSR2: ignored"); });
  std::string log = daemon.Log();
  EXPECT_TRUE(Contains(log, "received SIGHUP: ignored")) << log;
  EXPECT_TRUE(Contains(log, "received SIGUSR1: ignored")) << log;
  EXPECT_TRUE(Contains(log, "received SIGUSR2: ignored")) << log;
  ASSERT_TRUE(daemon.Running()) << log;
  absl::StatusOr<HealthStatus> health = CheckHealth(daemon.address());
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kServing);
  // It still stops cleanly, and takes its socket file with it.
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
  EXPECT_EQ(ModeOf(daemon.socket_path()), 0u) << "socket file left behind";
}

TEST(ProcessHygieneTest, SocketFolderIsCreated0755UnderAnyUmask) {
  kcache::testing::TempDir dir;
  kcache::testing::DaemonOptions options;
  options.socket = dir.path() + "/run/kcache/kcache.sock";
  options.extra_flags = {"--no-toolkit"};
  DaemonProcess daemon(options);
  mode_t old_umask = umask(0);  // the spawned daemon inherits it
  absl::Status started = daemon.Start();
  umask(old_umask);
  ASSERT_TRUE(started.ok()) << daemon.Log();
  EXPECT_EQ(ModeOf(dir.path() + "/run"), 0755u);
  EXPECT_EQ(ModeOf(dir.path() + "/run/kcache"), 0755u);
  EXPECT_EQ(ModeOf(options.socket), 0660u);  // --socket-mode's default, umask or not
}

// The children of `parent` and their state letters (R, S, Z...), from /proc.
std::map<pid_t, char> ChildrenOf(pid_t parent) {
  std::map<pid_t, char> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = atoi(entry.path().filename().c_str());
    if (pid <= 0) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    pid_t ppid = 0;
    if (sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      children[pid] = state;
    }
  }
  return children;
}

bool Gone(pid_t pid) {  // exited (a zombie waiting for a reaper counts as gone)
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

// kcached killed with SIGKILL in the middle of a compile leaves no worker compiling on: each
// worker watches its socket and ends when the daemon's end closes.
TEST(ProcessHygieneTest, WorkersDieWithADaemonKilledMidCompile) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {
      "--compile-worker", testing::BinaryPath("engine/workers/kcache-compile-worker-faulty"),
      "--compile-workers", "1"};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::thread hang([&] {
    auto stub = ::kcache::testing::NewStub(daemon.address());
    ::kcache::testing::CallResolve(
        *stub,
        ::kcache::testing::ResolveSpec(::kcache::testing::WireSpec("spin", "// KCACHE_TEST_HANG\n"),
                                       8, 9),
        std::chrono::seconds(30));
  });
  // Wait until the worker spins (state R), then kill the daemon under it.
  pid_t worker = 0;
  for (int i = 0; i < 1000 && worker == 0; ++i) {
    for (const auto& [pid, state] : ChildrenOf(daemon.pid())) {
      if (state == 'R') worker = pid;
    }
    if (worker == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(worker, 0) << "no compile worker ever ran; log:\n" << daemon.Log();
  daemon.Kill(SIGKILL);
  daemon.Wait();
  for (int i = 0; i < 1000 && !Gone(worker); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(Gone(worker)) << "worker " << worker << " still compiling, orphaned";
  if (!Gone(worker)) kill(worker, SIGKILL);
  hang.join();
}

}  // namespace
}  // namespace kcache
