// kcached as a careless operator or a stray signal finds it: signals it does not stop for,
// the socket folder's mode under any umask, and the status a call cut off by shutdown gets.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/testutil/daemon_process.h"
#include "tests/testutil/run.h"

namespace kcache {
namespace {

using ::kcache::testing::CheckHealth;
using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::HealthStatus;

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
  for (int i = 0; i < 500 && !Contains(daemon.Log(), "received SIGUSR2: ignored"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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

}  // namespace
}  // namespace kcache
