// Hostile clients of kcached's Redis door against a real kcached with small bounds (a few MiB
// exercise them): pipelined GETs of a large value whose replies are never read, and
// unfinished SETs on many connections. kcached's resident memory (VmRSS) stays within the
// documented bound (--redis-total-max-bytes plus 128 KiB a connection, plus the values its two
// door threads are reading) while another client keeps getting answers throughout.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/http.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/memory_watch.h"
#include "tests/testutil/run.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::ResidentBytes;
using ::kcache::testing::RssSampler;
using ::kcache::testing::SteadyClient;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kValueBytes = 2 * kMiB;   // --redis-value-max-bytes
constexpr uint64_t kTotalBytes = 12 * kMiB;  // --redis-total-max-bytes
// What kcached may hold beside the door's own bound: the values its two door threads are
// reading (each read copies a value out of its bundle), the allocator's slack.
constexpr uint64_t kSlackBytes = ::kcache::testing::kAllocatorSlackBytes;

std::string Resp(const std::vector<std::string>& args) {
  std::string out = absl::StrCat("*", args.size(), "\r\n");
  for (const std::string& arg : args) absl::StrAppend(&out, "$", arg.size(), "\r\n", arg, "\r\n");
  return out;
}

// Sends as much of `bytes` as the peer takes without blocking for long (the attackers never
// read, so kcached may stop reading them too); the bytes sent.
size_t SendSome(int fd, const std::string& bytes) {
  size_t sent = 0;
  for (int stalls = 0; sent < bytes.size() && stalls < 20;) {
    ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 20) == 0) ++stalls;
  }
  return sent;
}

// Reads what has arrived within `ms` (the connection's replies so far).
std::string ReadAvailable(int fd, int ms) {
  std::string got;
  char buffer[65536];
  pollfd p{fd, POLLIN, 0};
  while (poll(&p, 1, ms) > 0) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

class HostileRedisDoorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::kcache::testing::SmallAsanQuarantine();
    port_ = ::kcache::testing::FreePort();
    daemon_.options().extra_flags = {"--no-toolkit",
                                     "--warm-start-max-bytes",
                                     "0",
                                     "--redis-listen",
                                     absl::StrCat("127.0.0.1:", port_),
                                     "--redis-value-max-bytes",
                                     "2MiB",
                                     "--redis-buffer-max-bytes",
                                     "4MiB",
                                     "--redis-total-max-bytes",
                                     "12MiB"};
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    stub_ = ::kcache::testing::NewStub(daemon_.address());
    steady_fd_ = ::kcache::testing::ConnectLoopback(port_);
    ASSERT_GE(steady_fd_, 0);
    ASSERT_EQ(Ask(steady_fd_, Resp({"SET", "pt2:small", "small"}), 5), "+OK\r\n");
  }
  void TearDown() override {
    if (steady_fd_ >= 0) close(steady_fd_);
  }

  // Sends `command` on `fd` and reads `want` bytes of reply (fewer when it stops).
  static std::string Ask(int fd, const std::string& command, size_t want) {
    (void)!send(fd, command.data(), command.size(), MSG_NOSIGNAL);
    std::string got;
    char buffer[4096];
    while (got.size() < want) {
      ssize_t n = recv(fd, buffer, std::min(sizeof(buffer), want - got.size()), 0);
      if (n <= 0) break;
      got.append(buffer, static_cast<size_t>(n));
    }
    return got;
  }

  // The well-behaved client: GET of a small value, answered every time.
  bool SteadyGet() { return Ask(steady_fd_, Resp({"GET", "pt2:small"}), 11) == "$5\r\nsmall\r\n"; }

  uint64_t Counter(const std::string& name) { return ::kcache::testing::StatCounter(*stub_, name); }

  // Waits until the door's held bytes stop moving (the attack has done what it can), at most
  // 30 s.
  void WaitUntilSettled() {
    uint64_t last = UINT64_MAX;
    for (int still = 0, polls = 0; still < 5 && polls < 300; ++polls) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      uint64_t now = Counter("redis.held_bytes");
      still = now == last ? still + 1 : 0;
      last = now;
    }
  }

  // The bound the door promises for `connections` open.
  static uint64_t Bound(int connections) { return kTotalBytes + connections * (128 << 10); }

  DaemonProcess daemon_;
  std::unique_ptr<v1::KernelCache::Stub> stub_;
  int port_ = 0;
  int steady_fd_ = -1;
};

TEST_F(HostileRedisDoorTest, PipelinedGetsWhoseRepliesAreNeverReadStayWithinTheBounds) {
  const std::string value(kValueBytes, 'v');
  int setter = ::kcache::testing::ConnectLoopback(port_);
  ASSERT_EQ(Ask(setter, Resp({"SET", "pt2:big", value}), 5), "+OK\r\n");
  // One GET read whole first: the read path's own allocations are in the baseline.
  std::string reply = Ask(setter, Resp({"GET", "pt2:big"}), kValueBytes + 11);
  ASSERT_EQ(reply.size(), kValueBytes + 11);
  close(setter);
  const uint64_t baseline = ResidentBytes(daemon_.pid());

  constexpr int kAttackers = 8, kGets = 120;  // ~2 GB of replies if all were built
  std::string gets;
  for (int i = 0; i < kGets; ++i) gets += Resp({"GET", "pt2:big"});
  std::vector<int> attackers;
  int steady_answered = 0;
  {
    RssSampler rss(daemon_.pid());
    SteadyClient steady([this] { return SteadyGet(); });
    for (int i = 0; i < kAttackers; ++i) {
      int fd = ::kcache::testing::ConnectLoopback(port_);
      ASSERT_GE(fd, 0);
      int small = 4096;  // a small receive buffer: the replies pile up in kcached, not here
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
      EXPECT_EQ(SendSome(fd, gets), gets.size());
      attackers.push_back(fd);
    }
    WaitUntilSettled();
    steady.Stop();
    rss.Stop();
    std::printf("door: %llu hits, %llu bytes held, %llu refused over the total\n",
                static_cast<unsigned long long>(Counter("redis.hits")),
                static_cast<unsigned long long>(Counter("redis.held_bytes")),
                static_cast<unsigned long long>(Counter("redis.refused_total_bytes")));
    steady_answered = steady.answered();
    EXPECT_GT(steady.answered(), 0);
    EXPECT_EQ(steady.failed(), 0) << "the well-behaved client lost answers";
    uint64_t grew = rss.peak() > baseline ? rss.peak() - baseline : 0;
    std::printf(
        "RSS: baseline %llu MiB, peak %llu MiB (grew %llu KiB; bound %llu MiB + %llu MiB "
        "slack)\n",
        static_cast<unsigned long long>(baseline / kMiB),
        static_cast<unsigned long long>(rss.peak() / kMiB),
        static_cast<unsigned long long>(grew >> 10),
        static_cast<unsigned long long>(Bound(kAttackers + 1) / kMiB),
        static_cast<unsigned long long>(kSlackBytes / kMiB));
    EXPECT_LE(grew, Bound(kAttackers + 1) + kSlackBytes);
    EXPECT_LE(Counter("redis.held_bytes"), Bound(kAttackers + 1));
  }
  // Connections that do not read were not read from: most of their GETs are unanswered (a
  // few replies went into the kernel's socket buffers; all 960 would be ~2 GB).
  uint64_t attacker_hits = Counter("redis.hits") - static_cast<uint64_t>(steady_answered) - 1;
  EXPECT_LT(attacker_hits, static_cast<uint64_t>(kAttackers * kGets / 2));
  // One that starts reading gets its replies, each of the value.
  std::string first = ReadAvailable(attackers.back(), 200);
  EXPECT_EQ(first.substr(0, 10), "$2097152\r\n") << first.substr(0, 200);
  for (int fd : attackers) close(fd);
  EXPECT_TRUE(SteadyGet());
  ::kcache::testing::WaitFor([&] { return Counter("redis.held_bytes") == 0; });
  EXPECT_EQ(Counter("redis.held_bytes"), 0u);
}

TEST_F(HostileRedisDoorTest, UnfinishedSetsOnManyConnectionsStayWithinTheTotal) {
  const uint64_t baseline = ResidentBytes(daemon_.pid());
  constexpr int kAttackers = 48;  // ~90 MiB of unfinished values if all were held
  std::vector<int> attackers;
  {
    RssSampler rss(daemon_.pid());
    SteadyClient steady([this] { return SteadyGet(); });
    for (int i = 0; i < kAttackers; ++i) {
      int fd = ::kcache::testing::ConnectLoopback(port_);
      ASSERT_GE(fd, 0);
      std::string unfinished = absl::StrCat("*3\r\n$3\r\nSET\r\n$", absl::StrCat("pt2:s", i).size(),
                                            "\r\npt2:s", i, "\r\n$", kValueBytes, "\r\n");
      unfinished += std::string(kValueBytes - 100 * 1024, 'u');  // and never the rest
      SendSome(fd, unfinished);
      attackers.push_back(fd);
    }
    WaitUntilSettled();
    steady.Stop();
    rss.Stop();
    std::printf("door: %llu hits, %llu bytes held, %llu refused over the total\n",
                static_cast<unsigned long long>(Counter("redis.hits")),
                static_cast<unsigned long long>(Counter("redis.held_bytes")),
                static_cast<unsigned long long>(Counter("redis.refused_total_bytes")));
    EXPECT_GT(steady.answered(), 0);
    EXPECT_EQ(steady.failed(), 0) << "the well-behaved client lost answers";
    uint64_t grew = rss.peak() > baseline ? rss.peak() - baseline : 0;
    std::printf(
        "RSS: baseline %llu MiB, peak %llu MiB (grew %llu KiB; bound %llu MiB + %llu MiB "
        "slack)\n",
        static_cast<unsigned long long>(baseline / kMiB),
        static_cast<unsigned long long>(rss.peak() / kMiB),
        static_cast<unsigned long long>(grew >> 10),
        static_cast<unsigned long long>(Bound(kAttackers + 1) / kMiB),
        static_cast<unsigned long long>(kSlackBytes / kMiB));
    EXPECT_LE(grew, Bound(kAttackers + 1) + kSlackBytes);
    EXPECT_LE(Counter("redis.held_bytes"), Bound(kAttackers + 1));
  }
  // The connections past the total were told why, naming the flag, and closed.
  int told = 0;
  for (int fd : attackers) {
    if (Contains(ReadAvailable(fd, 50), "--redis-total-max-bytes")) ++told;
    close(fd);
  }
  EXPECT_GE(told, 1);
  EXPECT_EQ(Counter("redis.refused_total_bytes"), static_cast<uint64_t>(told));
  EXPECT_TRUE(SteadyGet());
  // A whole SET of the largest value goes through once they are gone.
  ::kcache::testing::WaitFor([&] { return Counter("redis.held_bytes") == 0; });
  int fd = ::kcache::testing::ConnectLoopback(port_);
  EXPECT_EQ(Ask(fd, Resp({"SET", "pt2:whole", std::string(kValueBytes, 'w')}), 5), "+OK\r\n");
  close(fd);
}

}  // namespace
}  // namespace kcache
