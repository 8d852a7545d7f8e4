// ConnectionServer over real unix sockets with a tiny line-echo protocol: many connections at
// once, a request split across reads, the connection cap, a client that stops reading (the
// bytes held for it stay bounded), a half-closed client, idle connections, packets (an oversized
// one, a greeting carrying a descriptor), and Stop with connections open.
#include "daemon/service/connection_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::TempDir;
using ::kcache::testing::WaitFor;

// What the echo protocol saw, across its connections.
struct EchoCounts {
  std::atomic<int> open{0};  // handlers alive
  std::atomic<int> refused{0};
  std::atomic<int> idle{0};
  std::atomic<int> oversized{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> max_unsent{0};  // the most a connection held unsent at a turn's end
};

// kStream: each line ("...\n") is answered with itself; "quit\n" with "bye\n", then the
// connection closes. kPackets: each message with itself.
class Echo final : public ConnectionHandler {
 public:
  explicit Echo(EchoCounts* counts) : counts_(*counts) { ++counts_.open; }
  ~Echo() override { --counts_.open; }

  void OnInput(Connection& c, absl::string_view input) override {
    counts_.bytes_in += input.size();
    if (packets_) {
      c.Send(std::string(input));
      return;
    }
    line_.append(input.data(), input.size());
    for (size_t end; (end = line_.find('\n')) != std::string::npos;) {
      std::string line = line_.substr(0, end + 1);
      line_.erase(0, end + 1);
      if (line == "quit\n") {
        c.Send("bye\n");
        c.CloseAfterSending();
        return;
      }
      c.stream_output()->append(line);
    }
  }
  void OnOversized(Connection& c, size_t bytes) override {
    ++counts_.oversized;
    c.Send(absl::StrCat("too long: ", bytes));
  }
  void EndTurn(Connection& c) override {
    uint64_t unsent = c.unsent_bytes();
    uint64_t seen = counts_.max_unsent.load();
    while (unsent > seen && !counts_.max_unsent.compare_exchange_weak(seen, unsent)) {
    }
  }
  void OnIdle(Connection& c) override { ++counts_.idle; }

  bool packets_ = false;

 private:
  EchoCounts& counts_;
  std::string line_;
};

class EchoProtocol final : public ConnectionProtocol {
 public:
  EchoProtocol(Framing framing, int greeting_fd = -1)
      : framing_(framing), greeting_fd_(greeting_fd) {}

  std::unique_ptr<ConnectionHandler> Open(Connection& c) override {
    if (greeting_fd_ >= 0 && !c.SendNow("hello", greeting_fd_).ok()) return nullptr;
    auto echo = std::make_unique<Echo>(&counts);
    echo->packets_ = framing_ == Framing::kPackets;
    return echo;
  }
  std::string Refusal() override {
    ++counts.refused;
    return "full\n";
  }

  EchoCounts counts;

 private:
  const Framing framing_;
  const int greeting_fd_;
};

// A client socket connected to `path`.
int Dial(const std::string& path, int type = SOCK_STREAM) {
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until `want` bytes came, the peer closed or 10 s passed without a byte.
std::string Receive(int fd, size_t want) {
  std::string got;
  char buffer[65536];
  while (got.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    ssize_t n = recv(fd, buffer, std::min(sizeof(buffer), want - got.size()), 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

// True when the peer closed (EOF, or a reset) within 10 s; what came before is dropped.
bool ClosedByPeer(int fd) {
  char buffer[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return false;
    if (recv(fd, buffer, sizeof(buffer), 0) <= 0) return true;
  }
}

class ConnectionServerTest : public ::testing::Test {
 protected:
  // Starts a server on a socket in a fresh folder.
  std::unique_ptr<ConnectionServer> Start(ConnectionServerOptions options,
                                          ConnectionProtocol* protocol) {
    options.name = "test";
    auto server = std::make_unique<ConnectionServer>(options, protocol);
    absl::Status started =
        server->Start(ListenAddress{.address = "unix:" + path_, .flag = "--test-socket"});
    EXPECT_TRUE(started.ok()) << started;
    return server;
  }

  TempDir dir_;
  std::string path_ = dir_ / "s.sock";
};

TEST_F(ConnectionServerTest, ManyConnectionsAtOnceAreEachAnswered) {
  EchoProtocol echo(Framing::kStream);
  ConnectionServerOptions options;
  options.max_connections = 200;
  std::unique_ptr<ConnectionServer> server = Start(options, &echo);
  constexpr int kClients = 100;
  std::vector<int> fds;
  for (int i = 0; i < kClients; ++i) {
    fds.push_back(Dial(path_));
    ASSERT_GE(fds.back(), 0);
  }
  // All of them send before any reads: each is served on its own.
  for (int i = 0; i < kClients; ++i) ASSERT_TRUE(SendAll(fds[i], absl::StrCat("client ", i, "\n")));
  std::vector<std::thread> readers;
  std::atomic<int> right{0};
  for (int i = 0; i < kClients; ++i) {
    readers.emplace_back([&, i] {
      std::string want = absl::StrCat("client ", i, "\n");
      if (Receive(fds[i], want.size()) == want) ++right;
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(right.load(), kClients);
  EXPECT_EQ(server->connections(), static_cast<size_t>(kClients));
  for (int fd : fds) close(fd);
  EXPECT_TRUE(WaitFor([&] { return server->connections() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return echo.counts.open.load() == 0; }));
}

TEST_F(ConnectionServerTest, ARequestSplitAcrossReadsIsAnsweredWhole) {
  EchoProtocol echo(Framing::kStream);
  std::unique_ptr<ConnectionServer> server = Start({}, &echo);
  int fd = Dial(path_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "hel"));
  // The first piece is read (and held) before the rest arrives.
  ASSERT_TRUE(WaitFor([&] { return echo.counts.bytes_in.load() == 3; }));
  ASSERT_TRUE(SendAll(fd, "lo\nwor"));
  ASSERT_TRUE(WaitFor([&] { return echo.counts.bytes_in.load() == 9; }));
  ASSERT_TRUE(SendAll(fd, "ld\n"));
  EXPECT_EQ(Receive(fd, 12), "hello\nworld\n");
  close(fd);
}

TEST_F(ConnectionServerTest, ConnectionsPastTheCapAreToldAndClosed) {
  EchoProtocol echo(Framing::kStream);
  ConnectionServerOptions options;
  options.max_connections = 2;
  std::unique_ptr<ConnectionServer> server = Start(options, &echo);
  int first = Dial(path_);
  int second = Dial(path_);
  ASSERT_TRUE(SendAll(first, "a\n"));
  ASSERT_TRUE(SendAll(second, "b\n"));
  EXPECT_EQ(Receive(first, 2), "a\n");
  EXPECT_EQ(Receive(second, 2), "b\n");
  int third = Dial(path_);
  ASSERT_GE(third, 0);
  EXPECT_EQ(Receive(third, 5), "full\n");
  EXPECT_TRUE(ClosedByPeer(third));
  EXPECT_EQ(echo.counts.refused.load(), 1);
  EXPECT_EQ(server->connections(), 2u);
  // A place freed is a place taken.
  close(first);
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 1; }));
  int fourth = Dial(path_);
  ASSERT_TRUE(SendAll(fourth, "d\n"));
  EXPECT_EQ(Receive(fourth, 2), "d\n");
  EXPECT_EQ(echo.counts.refused.load(), 1);
  for (int fd : {second, third, fourth}) close(fd);
}

TEST_F(ConnectionServerTest, AClientThatStopsReadingIsNotReadFromAndBlocksNoOne) {
  EchoProtocol echo(Framing::kStream);
  ConnectionServerOptions options;
  options.read_bytes = 4096;
  std::unique_ptr<ConnectionServer> server = Start(options, &echo);
  int hog = Dial(path_);
  ASSERT_GE(hog, 0);
  // Lines of 64 bytes, never read: sent until the socket takes no more for a while.
  std::string line = std::string(63, 'x') + "\n";
  std::string lines;
  for (int i = 0; i < 1024; ++i) lines += line;
  uint64_t sent = 0;
  for (int stalls = 0; stalls < 20 && sent < (uint64_t{64} << 20);) {
    ssize_t n = send(hog, lines.data(), lines.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
      continue;
    }
    pollfd p{hog, POLLOUT, 0};
    if (poll(&p, 1, 50) == 0) ++stalls;
  }
  // The server stopped reading it: what it took is what its socket could not pass on, and
  // what it held unsent stayed within one turn's replies (one read's worth, lines included).
  EXPECT_LT(echo.counts.bytes_in.load(), sent);
  EXPECT_LE(echo.counts.max_unsent.load(), options.read_bytes + line.size());
  // Another client is served at once.
  int other = Dial(path_);
  ASSERT_TRUE(SendAll(other, "still here\n"));
  EXPECT_EQ(Receive(other, 11), "still here\n");
  // Read at last, every reply arrives, whole and in order.
  uint64_t echoed = 0;
  bool intact = true;
  char buffer[65536];
  while (echoed < sent) {
    pollfd p{hog, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    ssize_t n = recv(hog, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i, ++echoed) {
      intact = intact && buffer[i] == ((echoed % 64) == 63 ? '\n' : 'x');
    }
  }
  EXPECT_EQ(echoed, sent);
  EXPECT_TRUE(intact);
  for (int fd : {hog, other}) close(fd);
}

TEST_F(ConnectionServerTest, AHalfClosedClientGetsItsRepliesThenTheClose) {
  EchoProtocol echo(Framing::kStream);
  std::unique_ptr<ConnectionServer> server = Start({}, &echo);
  int fd = Dial(path_);
  ASSERT_TRUE(SendAll(fd, "one\ntwo\n"));
  ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
  EXPECT_EQ(Receive(fd, 8), "one\ntwo\n");
  EXPECT_TRUE(ClosedByPeer(fd));
  EXPECT_TRUE(WaitFor([&] { return echo.counts.open.load() == 0; }));
  close(fd);
}

TEST_F(ConnectionServerTest, CloseAfterSendingSendsTheLastReplyFirst) {
  EchoProtocol echo(Framing::kStream);
  std::unique_ptr<ConnectionServer> server = Start({}, &echo);
  int fd = Dial(path_);
  // What follows quit is never answered, and closing over it loses no reply.
  ASSERT_TRUE(SendAll(fd, "a\nquit\nignored\n"));
  EXPECT_EQ(Receive(fd, 6), "a\nbye\n");
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
}

TEST_F(ConnectionServerTest, SilentConnectionsAreClosedAfterTheIdleTimeout) {
  EchoProtocol echo(Framing::kStream);
  ConnectionServerOptions options;
  options.idle_timeout = absl::Milliseconds(200);
  std::unique_ptr<ConnectionServer> server = Start(options, &echo);
  int fd = Dial(path_);
  ASSERT_TRUE(SendAll(fd, "a\n"));
  EXPECT_EQ(Receive(fd, 2), "a\n");
  EXPECT_TRUE(ClosedByPeer(fd));
  EXPECT_EQ(echo.counts.idle.load(), 1);
  EXPECT_TRUE(WaitFor([&] { return echo.counts.open.load() == 0; }));
  close(fd);
}

TEST_F(ConnectionServerTest, PacketsAreMessagesAndAnOversizedOneIsDropped) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EchoProtocol echo(Framing::kPackets, /*greeting_fd=*/pipe_fds[1]);
  ConnectionServerOptions options;
  options.framing = Framing::kPackets;
  options.read_bytes = 1024;
  options.max_reads_per_turn = 4;
  std::unique_ptr<ConnectionServer> server = Start(options, &echo);
  int fd = Dial(path_, SOCK_SEQPACKET);
  ASSERT_GE(fd, 0);
  // The greeting carries the descriptor: what is written to it comes out of the pipe.
  char greeting[16];
  iovec iov{greeting, sizeof(greeting)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ASSERT_EQ(recvmsg(fd, &msg, 0), 5);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  ASSERT_NE(cmsg, nullptr);
  ASSERT_EQ(cmsg->cmsg_type, SCM_RIGHTS);
  int passed = -1;
  std::memcpy(&passed, CMSG_DATA(cmsg), sizeof(int));
  ASSERT_EQ(write(passed, "!", 1), 1);
  char bang = 0;
  ASSERT_EQ(read(pipe_fds[0], &bang, 1), 1);
  EXPECT_EQ(bang, '!');
  // Ten messages (more than a turn reads), one too long among them: each answered, in order.
  for (int i = 0; i < 10; ++i) {
    std::string message = i == 5 ? std::string(1025, 'y') : absl::StrCat("message ", i);
    ASSERT_EQ(send(fd, message.data(), message.size(), 0), static_cast<ssize_t>(message.size()));
  }
  for (int i = 0; i < 10; ++i) {
    char buffer[2048];
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 10000), 0);
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(buffer, static_cast<size_t>(n)),
              i == 5 ? "too long: 1025" : absl::StrCat("message ", i));
  }
  EXPECT_EQ(echo.counts.oversized.load(), 1);
  for (int f : {fd, passed, pipe_fds[0], pipe_fds[1]}) close(f);
}

TEST_F(ConnectionServerTest, StopClosesOpenConnectionsAndDestroysTheirHandlers) {
  EchoProtocol echo(Framing::kStream);
  std::unique_ptr<ConnectionServer> server = Start({}, &echo);
  std::vector<int> fds;
  for (int i = 0; i < 8; ++i) {
    fds.push_back(Dial(path_));
    // Half a request each, and one answered.
    ASSERT_TRUE(SendAll(fds.back(), "answered\nhalf"));
    ASSERT_EQ(Receive(fds.back(), 9), "answered\n");
  }
  ASSERT_EQ(echo.counts.open.load(), 8);
  server->Stop();
  EXPECT_EQ(echo.counts.open.load(), 0);
  EXPECT_EQ(server->connections(), 0u);
  for (int fd : fds) {
    EXPECT_TRUE(ClosedByPeer(fd));
    close(fd);
  }
  server->Stop();             // idempotent
  EXPECT_LT(Dial(path_), 0);  // nothing listens
}

TEST_F(ConnectionServerTest, AnAddressThatCannotBeUsedIsRefusedNamingTheFlag) {
  EchoProtocol echo(Framing::kPackets);
  ConnectionServerOptions options;
  options.framing = Framing::kPackets;
  ConnectionServer server(options, &echo);
  absl::Status tcp = server.Start(ListenAddress{.address = "127.0.0.1:0", .flag = "--x"});
  EXPECT_TRUE(absl::IsInvalidArgument(tcp)) << tcp;
  EXPECT_NE(tcp.message().find("--x"), std::string::npos) << tcp;
  ConnectionServer stream({}, &echo);
  absl::Status long_path =
      stream.Start(ListenAddress{.address = "unix:" + std::string(200, 'p'), .flag = "--x"});
  EXPECT_TRUE(absl::IsInvalidArgument(long_path)) << long_path;
}

}  // namespace
}  // namespace kcache
