// kcached's Redis door driven by redis-cli and by raw sockets: every command, binary values,
// a value over the limit, hostile frames, many idle connections, and values that outlive a
// restart (they are in the store). redis-cli is Debian's redis-tools (scripts/install-deps.sh).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kcache/kcache.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/http.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/toolkit.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::DaemonOptions;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::FreePort;
using ::kcache::testing::RunResult;

RunResult Shell(const std::string& command) { return ::kcache::testing::Run(command); }

// Idle connections the bound test opens: 10,000 (docs/torch-compile.md says the door holds that
// many open) where the descriptor limit allows (the test and kcached each need one per
// connection), else as many as it allows.
int IdleConnections() {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;  // inherited by the kcached the fixture starts
  setrlimit(RLIMIT_NOFILE, &files);
  getrlimit(RLIMIT_NOFILE, &files);
  return static_cast<int>(std::min<rlim_t>(10000, files.rlim_cur > 300 ? files.rlim_cur - 300 : 0));
}

// A statistic of the kcached at `address` (0 when it cannot be read: the test then fails on it).
uint64_t DaemonCounter(const std::string& address, const std::string& name) {
  client::ClientOptions options;
  options.address = address;
  options.local_compile_fallback = false;
  options.fast_path = false;
  absl::StatusOr<std::unique_ptr<client::Client>> c = client::Client::Connect(options);
  if (!c.ok()) return 0;
  absl::StatusOr<client::DaemonStats> stats = (*c)->Stat();
  return stats.ok() ? stats->Counter(name) : 0;
}

class RedisDoorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Shell("redis-cli --version").exit_code != 0) GTEST_SKIP() << "redis-cli is not installed";
    port_ = FreePort();
    idle_connections_ = IdleConnections();
    daemon_.options().extra_flags = {"--no-toolkit",
                                     "--redis-listen",
                                     absl::StrCat("127.0.0.1:", port_),
                                     "--redis-value-max-bytes",
                                     "1MiB",
                                     "--redis-buffer-max-bytes",
                                     "3MiB",
                                     "--redis-max-connections",
                                     absl::StrCat(idle_connections_ + 5)};
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
  }

  // redis-cli against the door; `stdin_file` feeds -x (the last argument from stdin).
  RunResult Cli(const std::string& args, const std::string& stdin_file = "") {
    std::string command = absl::StrCat("redis-cli -p ", port_, " ", args);
    if (!stdin_file.empty())
      command = absl::StrCat("redis-cli -p ", port_, " -x ", args, " < ", stdin_file);
    return Shell(command);
  }

  uint64_t Counter(const std::string& name) { return DaemonCounter(daemon_.address(), name); }

  DaemonProcess daemon_;
  int port_ = 0;
  int idle_connections_ = 0;
};

// A raw connection to the door (-1 when refused), with a 10 s receive timeout.
int Connect(int port) { return ::kcache::testing::ConnectLoopback(port); }

// Sends `bytes`, then reads until the peer closes or `want` bytes came.
std::string Exchange(int fd, const std::string& bytes, size_t want = SIZE_MAX) {
  (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string got;
  char buffer[4096];
  while (got.size() < want) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

TEST_F(RedisDoorTest, ServesEveryCommandToRedisCli) {
  EXPECT_EQ(Cli("PING").output, "PONG\n");
  EXPECT_EQ(Cli("SET pt2:a hello EX 60").output, "OK\n");
  EXPECT_EQ(Cli("GET pt2:a").output, "hello\n");
  EXPECT_EQ(Cli("SET pt2:a again NX").output, "\n");  // nil: not set
  EXPECT_EQ(Cli("SET triton:b world").output, "OK\n");
  EXPECT_EQ(Cli("MGET pt2:a triton:b pt2:none").output, "hello\nworld\n\n");
  EXPECT_EQ(Cli("EXISTS pt2:a pt2:none triton:b").output, "2\n");
  EXPECT_EQ(Cli("DEL triton:b").output, "1\n");
  EXPECT_EQ(Cli("EXISTS triton:b").output, "0\n");
  EXPECT_EQ(Cli("SELECT 0").output, "OK\n");
  EXPECT_TRUE(Contains(Cli("SELECT 3").output, "database 0 only"));
  EXPECT_TRUE(Contains(Cli("INFO").output, "kcache_redis_door:1"));
  EXPECT_EQ(Cli("CLIENT SETINFO lib-name test").output, "OK\n");
  EXPECT_EQ(Cli("CLIENT SETNAME me").output, "OK\n");
  EXPECT_TRUE(Contains(Cli("-3 HELLO 3").output, "proto"));
  int fd = Connect(port_);  // RESP3's null, which redis-cli prints as RESP2's
  std::string hello = Exchange(fd, "HELLO 3\r\n", 1);
  for (int i = 0; i < 100 && !Contains(hello, "modules\r\n*0\r\n"); ++i)
    hello += Exchange(fd, "", 1);
  EXPECT_EQ(hello.substr(0, 4), "%7\r\n");
  EXPECT_EQ(Exchange(fd, "GET pt2:none\r\n", 3), "_\r\n");
  close(fd);
  EXPECT_EQ(Cli("COMMAND").output, "\n");
  EXPECT_EQ(Cli("QUIT").output, "OK\n");
  EXPECT_TRUE(Contains(Cli("GET").output, "wrong number of arguments for 'get'"));
  EXPECT_TRUE(Contains(Cli("FLUSHALL").output, "unknown command 'FLUSHALL'"));
  EXPECT_TRUE(Contains(Cli("SET mine:a v").output, "outside the namespaces"));
  EXPECT_TRUE(Contains(Cli("SET pt2:" + std::string(17000, 'k') + " v").output,
                       "over kcached's --redis-key-max-bytes 16384"));
  EXPECT_EQ(Counter("redis.refused_namespace"), 1u);
  EXPECT_EQ(Counter("redis.refused_key_too_big"), 1u);
  EXPECT_GE(Counter("redis.hits"), 3u);
  EXPECT_GE(Counter("redis.sets"), 2u);
}

TEST_F(RedisDoorTest, BinaryValuesRoundTripAndTooLargeOnesAreRefused) {
  std::string value;
  for (int i = 0; i < 70000; ++i) value.push_back(static_cast<char>(i * 7));
  std::string in = daemon_.dir() + "/value.bin";
  std::string out = daemon_.dir() + "/back.bin";
  std::ofstream(in, std::ios::binary) << value;
  ASSERT_EQ(Cli("SET pt2:bin", in).output, "OK\n");
  ASSERT_EQ(Shell(absl::StrCat("redis-cli -p ", port_, " --raw GET pt2:bin | head -c ",
                               value.size(), " > ", out))
                .exit_code,
            0);
  std::ifstream back(out, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(back), {}), value);

  std::string big = daemon_.dir() + "/big.bin";
  std::ofstream(big, std::ios::binary) << std::string((1 << 20) + 1, 'x');
  EXPECT_TRUE(Contains(Cli("SET pt2:big", big).output, "over kcached's --redis-value-max-bytes"));
  EXPECT_EQ(Cli("EXISTS pt2:big").output, "0\n");
  EXPECT_EQ(Counter("redis.refused_value_too_big"), 1u);

  // The connection that sent it stays framed and usable.
  int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  std::string set = absl::StrCat("*3\r\n$3\r\nSET\r\n$6\r\npt2:xx\r\n$", (2 << 20), "\r\n",
                                 std::string(2 << 20, 'y'), "\r\n");
  std::string reply = Exchange(fd, set + "*1\r\n$4\r\nPING\r\n", 0);
  for (int i = 0; i < 100 && !Contains(reply, "+PONG"); ++i) reply += Exchange(fd, "", 1);
  EXPECT_TRUE(Contains(reply, "-ERR an argument of 2097152 bytes")) << reply;
  EXPECT_TRUE(Contains(reply, "+PONG\r\n")) << reply;
  close(fd);
}

TEST_F(RedisDoorTest, HostileFramesGetAnErrorAndTheConnectionCloses) {
  const std::string frames[] = {
      "*1\r\n$99999999999999999999\r\n",
      "*1\r\n$1000000000000\r\n",
      "*1\r\n$3\r\nGETxx",
      "*99999999\r\n",
      "*2\r\n:1\r\n",
      std::string(100000, 'A'),
  };
  for (const std::string& frame : frames) {
    int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    std::string reply = Exchange(fd, frame);
    close(fd);
    EXPECT_TRUE(Contains(reply, "-ERR Protocol error")) << frame.substr(0, 30) << " -> " << reply;
  }
  // A frame left unterminated is waited for; the connection still answers what follows.
  int fd = Connect(port_);
  std::string reply = Exchange(fd, "*2\r\n$3\r\nGET\r\n$5\r\npt2", 0);
  reply = Exchange(fd, ":x\r\n", 5);
  EXPECT_EQ(reply, "$-1\r\n");
  close(fd);
  EXPECT_EQ(Counter("redis.refused_protocol"), 6u);
  // A command whose arguments, each within the value bound, together pass the buffer bound.
  fd = Connect(port_);
  std::string many = "*10\r\n";
  for (int i = 0; i < 3; ++i) {
    many += absl::StrCat("$", 1 << 20, "\r\n", std::string(1 << 20, 'z'), "\r\n");
  }
  many += absl::StrCat("$", 1 << 20, "\r\n", std::string(100000, 'z'));  // and no more
  reply = Exchange(fd, many);
  close(fd);
  EXPECT_TRUE(Contains(reply, "-ERR over kcached's --redis-buffer-max-bytes 3145728")) << reply;
  EXPECT_EQ(Counter("redis.refused_buffer"), 1u);
  EXPECT_EQ(Cli("PING").output, "PONG\n");
}

TEST_F(RedisDoorTest, ManyIdleConnectionsAreBoundedAndCostNoThreads) {
  if (idle_connections_ < 1000) GTEST_SKIP() << "fewer than 1,300 file descriptors allowed";
  std::vector<int> idle;
  for (int i = 0; i < idle_connections_ + 5; ++i) {
    int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // One more than --redis-max-connections: refused with a reason.
  int extra = Connect(port_);
  std::string refusal;
  refusal = Exchange(extra, "");  // until kcached closes it
  close(extra);
  EXPECT_TRUE(Contains(refusal, "--redis-max-connections")) << refusal;
  // The idle connections hold no thread each: kcached's thread count stays small.
  std::string threads = Shell(absl::StrCat("ls /proc/", daemon_.pid(), "/task | wc -l")).output;
  EXPECT_LT(std::stoi(threads), 200) << threads;
  // Each one still answers.
  EXPECT_EQ(Exchange(idle.front(), "PING\r\n", 7), "+PONG\r\n");
  EXPECT_EQ(Exchange(idle.back(), "PING\r\n", 7), "+PONG\r\n");
  for (int fd : idle) close(fd);
  // Once they close, new clients are served again.
  std::string pong;
  for (int i = 0; i < 200 && pong != "PONG\n"; ++i) {
    pong = Cli("PING").output;
    if (pong != "PONG\n") std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(pong, "PONG\n");
  EXPECT_GE(Counter("redis.refused_connections"), 1u);
}

// One command in RESP, as a client library sends it.
std::string Resp(const std::vector<std::string>& args) {
  std::string out = absl::StrCat("*", args.size(), "\r\n");
  for (const std::string& arg : args) absl::StrAppend(&out, "$", arg.size(), "\r\n", arg, "\r\n");
  return out;
}

std::string Bulk(const std::string& value) {
  return absl::StrCat("$", value.size(), "\r\n", value, "\r\n");
}

// saxpy for sm_90, as the toolkit at `root` compiles it ("" = the CUDA toolkit's NVRTC 13).
std::string RealCubin(const std::string& root) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit =
      root.empty() ? ::kcache::testing::SharedToolkit() : Toolkit::Load(root);
  EXPECT_TRUE(toolkit.ok()) << root << ": " << toolkit.status();
  if (!toolkit.ok()) return "";
  absl::StatusOr<std::string> cubin =
      ::kcache::testing::CompileCubin(*toolkit, "saxpy", ::kcache::testing::kSaxpySource, "sm_90");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
  return cubin.value_or("");
}

TEST_F(RedisDoorTest, ACubinNewerThanTheToldDriverIsAMissAndCounted) {
  const std::string root129 = ::kcache::testing::Nvrtc129Root();
  ASSERT_FALSE(root129.empty()) << "no NVRTC 12.9 wheel in .venv: run scripts/install-deps.sh";
  const std::string cubin13 = RealCubin(""), cubin129 = RealCubin(root129);
  ASSERT_FALSE(cubin13.empty());
  ASSERT_FALSE(cubin129.empty());
  const std::vector<std::pair<std::string, std::string>> values = {
      {"triton:g:k13.cubin", cubin13}, {"triton:g:k129.cubin", cubin129}, {"pt2:entry", "{}"}};
  for (const auto& [key, value] : values) {
    std::string file = daemon_.dir() + "/value";
    std::ofstream(file, std::ios::binary) << value;
    ASSERT_EQ(Cli("-x SET " + key, file).output, "OK\n") << key;
  }
  // What a connection that told `driver` (0: told nothing) gets for GET of each key, then MGET.
  auto served = [&](uint32_t driver, std::vector<bool> expected) {
    int fd = Connect(port_);
    if (driver != 0) {
      EXPECT_EQ(Exchange(fd, Resp({"KCACHE.DRIVER", std::to_string(driver)}), 5), "+OK\r\n");
    }
    std::string mget = absl::StrCat("*", values.size(), "\r\n");
    for (size_t i = 0; i < values.size(); ++i) {
      std::string reply = expected[i] ? Bulk(values[i].second) : "$-1\r\n";
      EXPECT_EQ(Exchange(fd, Resp({"GET", values[i].first}), reply.size()), reply)
          << "driver " << driver << ", " << values[i].first;
      mget += reply;
    }
    EXPECT_EQ(Exchange(fd, Resp({"MGET", values[0].first, values[1].first, values[2].first}),
                       mget.size()),
              mget)
        << "driver " << driver;
    close(fd);
  };
  served(0, {true, true, true});      // not told: the door cannot check, serves all
  served(13000, {true, true, true});  // a 13.0 driver loads 13.0 and 12.9 cubins
  EXPECT_EQ(Counter("redis.refused_driver_too_old"), 0u);
  served(12090, {false, true, true});                      // a 12.9 driver does not load 13.0's
  EXPECT_EQ(Counter("redis.refused_driver_too_old"), 2u);  // its GET and its MGET
  EXPECT_EQ(Counter("redis.refused_toolkit_unknown"), 0u);
  EXPECT_EQ(Counter("redis.misses"), 2u);
  EXPECT_EQ(Cli("EXISTS triton:g:k13.cubin").output, "1\n") << "kept for drivers that load it";
  for (const char* bad :
       {"KCACHE.DRIVER", "KCACHE.DRIVER 12.9", "KCACHE.DRIVER 0", "KCACHE.DRIVER 13000 12090"}) {
    RunResult reply = Cli(bad);
    EXPECT_TRUE(Contains(reply.output, "ERR KCACHE.DRIVER")) << bad << ": " << reply.output;
    EXPECT_TRUE(Contains(reply.output, "cuDriverGetVersion")) << bad << ": " << reply.output;
  }
}

TEST(RedisDoorRestartTest, ValuesOutliveARestartOnAUnixSocket) {
  if (Shell("redis-cli --version").exit_code != 0) GTEST_SKIP() << "redis-cli is not installed";
  DaemonProcess daemon;
  std::string socket = daemon.dir() + "/redis.sock";
  daemon.options().extra_flags = {"--no-toolkit", "--redis-listen", "unix:" + socket};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  EXPECT_EQ(Shell("redis-cli -s " + socket + " SET pt2:kept value1").output, "OK\n");
  EXPECT_EQ(daemon.Stop(), 0);
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  EXPECT_EQ(Shell("redis-cli -s " + socket + " GET pt2:kept").output, "value1\n");
}

TEST(RedisDoorPutByTest, AValueSaysWhoSetItAsTheKernelSawThem) {
  if (Shell("redis-cli --version").exit_code != 0) GTEST_SKIP() << "redis-cli is not installed";
  DaemonProcess daemon;
  std::string socket = daemon.dir() + "/redis.sock";
  int port = FreePort();
  daemon.options().extra_flags = {"--no-toolkit", "--redis-listen", "unix:" + socket};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  EXPECT_EQ(Shell("redis-cli -s " + socket + " SET pt2:from-unix value1").output, "OK\n");
  std::string ls =
      Shell(absl::StrCat(::kcache::testing::KcacheCli(), " ls --server ", daemon.address())).output;
  EXPECT_TRUE(Contains(ls, absl::StrCat("uid ", getuid(), " pid "))) << ls;
  EXPECT_TRUE(Contains(ls, "via kcached's Redis door on")) << ls;
  // Over TCP: the client's address and port.
  EXPECT_EQ(daemon.Stop(), 0);
  daemon.options().extra_flags = {"--no-toolkit", "--redis-listen",
                                  absl::StrCat("127.0.0.1:", port)};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  EXPECT_EQ(Shell(absl::StrCat("redis-cli -p ", port, " SET pt2:from-tcp value2")).output, "OK\n");
  ls = Shell(absl::StrCat(::kcache::testing::KcacheCli(), " ls --server ", daemon.address(),
                          " --json"))
           .output;
  EXPECT_TRUE(Contains(ls, "\"put_by\": \"ipv4:127.0.0.1:")) << ls;
}

// The door on a unix socket is its owner's alone by default (--redis-socket-mode 0600): another
// local user cannot connect, where on loopback TCP any could. `kcache env --server ADDR --redis`
// asks kcached for the door, so the worker is given no second address.
TEST(RedisDoorUnixTest, OnlyItsOwnerReachesTheDoorAndKcacheEnvFindsIt) {
  if (Shell("redis-cli --version").exit_code != 0) GTEST_SKIP() << "redis-cli is not installed";
  DaemonProcess daemon;
  std::string socket = daemon.dir() + "/redis.sock";
  daemon.options().extra_flags = {"--no-toolkit", "--redis-listen", "unix://" + socket};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  struct stat st {};
  ASSERT_EQ(stat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Shell("redis-cli -s " + socket + " SET pt2:mine value").output, "OK\n");
  const bool can_switch_user = getuid() == 0 && Shell("command -v setpriv").exit_code == 0;
  if (can_switch_user) {
    chmod(daemon.dir().c_str(), 0755);  // the folder is open: only the socket's mode decides
    RunResult nobody = Shell("setpriv --reuid=nobody --regid=nogroup --clear-groups redis-cli -s " +
                             socket + " SET pt2:mine overwritten");
    EXPECT_TRUE(Contains(nobody.output, "ermission denied")) << nobody.output;
    EXPECT_EQ(Shell("redis-cli -s " + socket + " GET pt2:mine").output, "value\n");
  }

  std::string env =
      Shell(absl::StrCat(::kcache::testing::KcacheCli(), " env --shims ", daemon.dir(),
                         "/shims --server ", daemon.address(), " --redis 2>&1"))
          .output;
  EXPECT_TRUE(Contains(env, "TORCHINDUCTOR_REDIS_URL=unix://" + socket + "\n")) << env;
  EXPECT_TRUE(Contains(env, "KCACHE_REDIS_ADDR=unix:" + socket + "\n")) << env;
  EXPECT_FALSE(Contains(env, "TORCHINDUCTOR_REDIS_HOST")) << env;
  EXPECT_FALSE(Contains(env, "is TCP")) << env;
  // A door named on TCP is still taken, with the risk said.
  env = Shell(absl::StrCat(::kcache::testing::KcacheCli(), " env --shims ", daemon.dir(),
                           "/shims --server ", daemon.address(), " --redis 127.0.0.1:6390 2>&1"))
            .output;
  EXPECT_TRUE(Contains(env, "TORCHINDUCTOR_REDIS_PORT=6390")) << env;
  EXPECT_TRUE(Contains(env, "every local user")) << env;
}

TEST(RedisDoorUnixTest, KcacheEnvSaysHowToOpenADoorWhenKcachedHasNone) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit"};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  RunResult env = Shell(absl::StrCat(::kcache::testing::KcacheCli(), " env --shims ", daemon.dir(),
                                     "/shims --server ", daemon.address(), " --redis 2>&1"));
  EXPECT_NE(env.exit_code, 0) << env.output;
  EXPECT_TRUE(Contains(env.output, "has no Redis door")) << env.output;
  EXPECT_TRUE(Contains(env.output, "--redis-listen unix://")) << env.output;
}

TEST(RedisDoorIdleTest, ASilentConnectionIsClosedAndCounted) {
  DaemonProcess daemon;
  int port = FreePort();
  daemon.options().extra_flags = {"--no-toolkit", "--redis-listen",
                                  absl::StrCat("127.0.0.1:", port), "--redis-idle-seconds", "1"};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  int fd = Connect(port);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(Exchange(fd, "PING\r\n", 7), "+PONG\r\n");
  // Then silence: kcached closes it (the read ends; the socket's 10 s timeout is far longer).
  char byte;
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0);
  close(fd);
  EXPECT_EQ(DaemonCounter(daemon.address(), "redis.idle_closed"), 1u);
  EXPECT_EQ(DaemonCounter(daemon.address(), "redis.connections"), 0u);
}

TEST(RedisDoorFlagsTest, ABadAddressOrBufferStopsStartUp) {
  for (std::vector<std::string> flags :
       {std::vector<std::string>{"--redis-listen", "nowhere"},
        std::vector<std::string>{"--redis-listen", "127.0.0.1:0", "--redis-value-max-bytes", "8MiB",
                                 "--redis-buffer-max-bytes", "8MiB"},
        std::vector<std::string>{"--redis-listen", "127.0.0.1:0", "--redis-namespaces", "a:b"},
        std::vector<std::string>{"--redis-listen", "127.0.0.1:0", "--redis-total-max-bytes",
                                 "32MiB"},
        std::vector<std::string>{"--redis-listen", "unix:///tmp/kcache-x.sock",
                                 "--redis-socket-mode", "9"}}) {
    DaemonProcess daemon;
    flags.insert(flags.begin(), "--no-toolkit");
    daemon.options().extra_flags = flags;
    ASSERT_TRUE(daemon.Spawn().ok());
    EXPECT_NE(daemon.Wait(), 0) << daemon.Log();
    EXPECT_TRUE(Contains(daemon.Log(), "--redis-")) << daemon.Log();
  }
}

}  // namespace
}  // namespace kcache
