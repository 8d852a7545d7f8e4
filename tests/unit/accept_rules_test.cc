// How kcached's accept loops take connections when descriptors run short
// (daemon/service/accept_rules.h): on a real listening socket of this process, with this
// process's own soft descriptor limit lowered around the calls.
#include "daemon/service/accept_rules.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/numbers.h"

namespace kcache {
namespace {

// The descriptors this process holds now.
std::vector<int> OpenDescriptors() {
  std::vector<int> open;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (absl::SimpleAtoi(entry->d_name, &fd) && fd != dirfd(dir)) open.push_back(fd);
  }
  closedir(dir);
  return open;
}

class AcceptRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &was_), 0);
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), size), 0);
    ASSERT_EQ(listen(listener_, 8), 0);
    ASSERT_EQ(getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size), 0);
    client_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(client_, reinterpret_cast<sockaddr*>(&address), size), 0);
  }
  void TearDown() override {
    setrlimit(RLIMIT_NOFILE, &was_);
    close(client_);
    close(listener_);
  }
  // Lowers the soft limit to leave exactly `free` descriptor numbers unused below it.
  void Leave(int free) {
    std::vector<int> open = OpenDescriptors();
    rlim_t limit = 0;
    auto unused_below = [&](rlim_t l) {
      return static_cast<int>(l) -
             static_cast<int>(std::count_if(open.begin(), open.end(),
                                            [&](int fd) { return fd < static_cast<int>(l); }));
    };
    while (unused_below(limit) < free) ++limit;
    rlimit low{limit, was_.rlim_max};
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  }

  rlimit was_{};
  int listener_ = -1;
  int client_ = -1;
};

TEST_F(AcceptRulesTest, AConnectionThatWouldLeaveLessThanTheHeadroomWaitsInTheBacklog) {
  Leave(kDescriptorHeadroom);  // the connection would take one of them
  std::vector<int> before = OpenDescriptors();
  errno = 0;
  EXPECT_EQ(AcceptKeepingHeadroom(listener_), -1);
  EXPECT_EQ(errno, EMFILE);
  EXPECT_TRUE(AcceptLackedResources(errno));
  EXPECT_EQ(OpenDescriptors(), before) << "the probes were all closed again";
  Leave(kDescriptorHeadroom + 1);
  int fd = AcceptKeepingHeadroom(listener_);
  ASSERT_GE(fd, 0) << "the connection waited and is accepted once the headroom is there";
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_NE(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  close(fd);
}

TEST_F(AcceptRulesTest, WithNoneWaitingItSaysSoAndThatIsNotALackOfResources) {
  int fd = AcceptKeepingHeadroom(listener_);
  ASSERT_GE(fd, 0);
  close(fd);
  errno = 0;
  EXPECT_EQ(AcceptKeepingHeadroom(listener_), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_FALSE(AcceptLackedResources(errno));
}

}  // namespace
}  // namespace kcache
