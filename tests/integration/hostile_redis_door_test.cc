// Hostile clients of kcached's Redis door against a real kcached with small bounds (a few MiB
// exercise them): pipelined GETs of a large value whose replies are never read, and
// unfinished SETs on many connections. kcached's resident memory (VmRSS) stays within the
// documented bound (--redis-total-max-bytes plus 128 KiB a connection, plus the values its two
// door threads are reading) while another client keeps getting answers throughout; past the
// total, replies are refused at once and kcached sleeps while the stuck connections wait.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testutil/daemon_counters.h"
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

// CPU seconds `pid` has used (utime + stime of /proc/PID/stat).
double CpuSeconds(pid_t pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  uint64_t ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stoull(field);  // utime, stime
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
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
  // One that starts reading gets its replies, each of the value (the first: the later ones
  // may have found the total full, and been refused).
  std::string first = ReadAvailable(attackers.front(), 200);
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

// Many connections pipeline GETs of a value and never read (30, then 80): past the total,
// each GET whose reply cannot be held is refused at once, naming the flag; what the door
// holds stays within its documented bound; a new connection's PING and a small GET and SET are
// answered at once; and kcached sleeps while the stuck connections wait.
TEST_F(HostileRedisDoorTest, StuckConnectionsPastTheTotalAreRefusedAndTheDoorSleeps) {
  const uint64_t value_bytes = kValueBytes;
  int setter = ::kcache::testing::ConnectLoopback(port_);
  ASSERT_EQ(Ask(setter, Resp({"SET", "pt2:big", std::string(value_bytes, 'v')}), 5), "+OK\r\n");
  close(setter);
  std::string gets;
  for (int i = 0; i < 20000; ++i) gets += Resp({"GET", "pt2:big"});
  std::vector<int> stuck;
  for (int connections : {30, 80}) {
    while (static_cast<int>(stuck.size()) < connections) {
      int fd = ::kcache::testing::ConnectLoopback(port_);
      ASSERT_GE(fd, 0);
      int small = 4096;  // the replies pile up in kcached, not here
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
      SendSome(fd, gets);
      stuck.push_back(fd);
    }
    WaitUntilSettled();
    const int64_t held = ::kcache::testing::DaemonCounter(daemon_, "redis.held_bytes");
    // The stuck ones, the steady client's and the counter's own (`kcache stat` is gRPC).
    const uint64_t bound = Bound(connections + 2);
    std::printf("%d stuck: held %lld bytes (bound %llu), %lld refused over the total\n",
                connections, static_cast<long long>(held), static_cast<unsigned long long>(bound),
                static_cast<long long>(
                    ::kcache::testing::DaemonCounter(daemon_, "redis.refused_total_bytes")));
    EXPECT_GT(held, 0);
    EXPECT_LE(static_cast<uint64_t>(held), bound);

    // kcached sleeps: the stuck connections cannot make progress, and nothing else is asked.
    const double cpu_before = CpuSeconds(daemon_.pid());
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const double cpu = CpuSeconds(daemon_.pid()) - cpu_before;
    std::printf("%d stuck: kcached used %.2f s of CPU in 2 s\n", connections, cpu);
    EXPECT_LT(cpu, 0.2) << "kcached spins while connections are stuck";

    // Others are answered at once: a new connection's PING, a small SET and GET, the steady one.
    int other = ::kcache::testing::ConnectLoopback(port_);
    ASSERT_GE(other, 0);
    timeval timeout{2, 0};
    setsockopt(other, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(steady_fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(Ask(other, Resp({"PING"}), 7), "+PONG\r\n");
    const double ping_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%d stuck: PING answered in %.2f ms\n", connections, ping_ms);
    EXPECT_LT(ping_ms, 1000.0);
    EXPECT_EQ(Ask(other, Resp({"SET", "pt2:other", "small"}), 5), "+OK\r\n");
    EXPECT_EQ(Ask(other, Resp({"GET", "pt2:other"}), 11), "$5\r\nsmall\r\n");
    EXPECT_TRUE(SteadyGet());
    close(other);
  }
  // Those that found the total full had their GETs refused at once, naming the flag: their
  // first reply is the refusal.
  int refused = 0;
  for (int fd : stuck) {
    std::string first(4096, '\0');
    pollfd p{fd, POLLIN, 0};
    ssize_t n = poll(&p, 1, 100) > 0 ? recv(fd, first.data(), first.size(), MSG_DONTWAIT) : 0;
    first.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (first.substr(0, 4) != "-ERR") continue;
    EXPECT_TRUE(Contains(first, "--redis-total-max-bytes")) << first.substr(0, 200);
    EXPECT_TRUE(Contains(first, "retry later")) << first.substr(0, 200);
    ++refused;
  }
  EXPECT_GE(refused, 1);
  for (int fd : stuck) close(fd);
  ::kcache::testing::WaitFor([&] { return Counter("redis.held_bytes") == 0; });
  EXPECT_EQ(Counter("redis.held_bytes"), 0u);
}

}  // namespace
}  // namespace kcache
