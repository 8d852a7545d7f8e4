// What operators see of a real kcached: systemd readiness notifications (Type=notify) and its
// log lines, text and JSON.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(DaemonNotifyTest, SaysReadyWhenServingAndStoppingOnSigterm) {
  kcache::testing::TempDir dir;
  std::string path = dir.path() + "/notify";
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto receive = [fd] {
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  };

  setenv("NOTIFY_SOCKET", path.c_str(), 1);  // the spawned daemon inherits it
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit"};
  ASSERT_TRUE(daemon.Spawn().ok());
  unsetenv("NOTIFY_SOCKET");
  std::string ready = receive();
  EXPECT_TRUE(Contains(ready, "READY=1")) << ready;
  // READY came after the socket serves: a health check answers at once.
  absl::StatusOr<kcache::testing::HealthStatus> health =
      kcache::testing::CheckHealth(daemon.address());
  ASSERT_TRUE(health.ok()) << health.status() << daemon.Log();
  daemon.Kill(SIGTERM);
  std::string stopping = receive();
  EXPECT_TRUE(Contains(stopping, "STOPPING=1")) << stopping;
  EXPECT_EQ(daemon.Wait(), 0) << daemon.Log();
  close(fd);
}

TEST(DaemonLogTest, JsonLogIsOneObjectPerLine) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit", "--log-format", "json", "--log-level", "debug"};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  // A refused request and a miss log lines of their own.
  auto stub = kcache::testing::NewStub(daemon.address());
  kcache::testing::CallResolve(*stub, v1::ResolveRequest());
  kcache::testing::CallResolve(
      *stub,
      kcache::testing::ResolveSpec(kcache::testing::WireSpec("k", "__global__ void k(){}"), 8, 6));
  daemon.Kill(SIGTERM);
  ASSERT_EQ(daemon.Wait(), 0) << daemon.Log();
  std::vector<std::string> lines = Lines(daemon.Log());
  ASSERT_GE(lines.size(), 5u) << daemon.Log();
  bool serving = false, refused = false, stopped = false;
  for (const std::string& line : lines) {
    nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(event.is_object()) << "not a JSON object: " << line;
    ASSERT_TRUE(event.contains("time") && event.contains("level") && event.contains("msg")) << line;
    std::string msg = event["msg"];
    serving |= Contains(msg, "kcached serving on");
    refused |= Contains(msg, "resolve refused");
    stopped |= Contains(msg, "kcached stopped");
  }
  EXPECT_TRUE(serving && refused && stopped) << daemon.Log();
}

TEST(DaemonLogTest, TextLogLinesStartWithTimeAndLevel) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit"};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  daemon.Kill(SIGTERM);
  ASSERT_EQ(daemon.Wait(), 0) << daemon.Log();
  const std::regex line_format(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (trace|debug|info|warn|error|critical) .+$)");
  std::vector<std::string> lines = Lines(daemon.Log());
  ASSERT_GE(lines.size(), 3u);
  for (const std::string& line : lines) {
    EXPECT_TRUE(std::regex_match(line, line_format)) << line;
  }
}

TEST(DaemonLogTest, UnknownLogFormatIsAUsageError) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit", "--log-format", "xml"};
  ASSERT_TRUE(daemon.Spawn().ok());
  EXPECT_EQ(daemon.Wait(), 2);
  EXPECT_TRUE(Contains(daemon.Log(), "--log-format")) << daemon.Log();
}

}  // namespace
}  // namespace kcache
