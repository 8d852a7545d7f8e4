// NotifySystemd (daemon/host/sd_notify.h) against a real datagram socket.
#include "daemon/host/sd_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

// A bound datagram socket: at a path, or abstract when `path` starts with '@'.
class Receiver {
 public:
  explicit Receiver(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.data(), path.size());
    if (path[0] == '@') address.sun_path[0] = '\0';
    socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0;
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Receiver() { close(fd_); }
  bool bound() const { return bound_; }
  std::string Receive() {
    char buf[512];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

class SdNotifyTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("NOTIFY_SOCKET"); }
  kcache::testing::TempDir dir_;
};

TEST_F(SdNotifyTest, WithoutNotifySocketNothingIsSent) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(NotifySystemd("READY=1").ok());
  setenv("NOTIFY_SOCKET", "", 1);
  EXPECT_TRUE(NotifySystemd("READY=1").ok());
}

TEST_F(SdNotifyTest, SendsTheStateToAPathSocket) {
  std::string path = dir_.path() + "/notify";
  Receiver receiver(path);
  ASSERT_TRUE(receiver.bound());
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ASSERT_TRUE(NotifySystemd("READY=1\nSTATUS=serving").ok());
  EXPECT_EQ(receiver.Receive(), "READY=1\nSTATUS=serving");
}

TEST_F(SdNotifyTest, SendsToAnAbstractSocket) {
  std::string name = "@kcache-sd-notify-test-" + std::to_string(getpid());
  Receiver receiver(name);
  ASSERT_TRUE(receiver.bound());
  setenv("NOTIFY_SOCKET", name.c_str(), 1);
  ASSERT_TRUE(NotifySystemd("STOPPING=1").ok());
  EXPECT_EQ(receiver.Receive(), "STOPPING=1");
}

TEST_F(SdNotifyTest, ErrorsNameTheSocket) {
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  absl::Status relative = NotifySystemd("READY=1");
  EXPECT_FALSE(relative.ok());
  EXPECT_NE(relative.message().find("relative/path"), absl::string_view::npos);
  std::string nobody = dir_.path() + "/nobody-listens";
  setenv("NOTIFY_SOCKET", nobody.c_str(), 1);
  absl::Status missing = NotifySystemd("READY=1");
  EXPECT_TRUE(absl::IsUnavailable(missing)) << missing;
  EXPECT_NE(missing.message().find(nobody), absl::string_view::npos);
}

}  // namespace
}  // namespace kcache
