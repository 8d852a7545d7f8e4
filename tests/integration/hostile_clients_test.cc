// kcached against clients that are careless or hostile: Resolve streams opened and never read,
// idle connections to the probe port, a herd of clients starting at once, a manifest larger
// than one gRPC message, a batch of compiles cancelled. Each test drives a real kcached on a temp
// socket.
//
// The abandoned-streams test prints the daemon's RSS before and after; for the figure in
// docs/kcached.md ("Bounds") run it with more streams:
//   KCACHE_TEST_ABANDONED_STREAMS=5000 build/tests/hostile_clients_test
//       --gtest_filter='*Abandoned*'   (one command line)
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/store/store.h"
#include "kcache/kcache.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/http.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/synthetic.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::StatCounter;
using ::kcache::testing::WaitFor;

// The resident set of process `pid`, in bytes (0 when unreadable).
uint64_t RssBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) << 10;
  }
  return 0;
}

// A Resolve that is started and never read. OnDone comes when the daemon refuses it, or when
// the test cancels it.
class AbandonedStream final : public grpc::ClientReadReactor<v1::ResolveResponse> {
 public:
  AbandonedStream(v1::KernelCache::Stub* stub, const v1::ResolveRequest& request,
                  std::atomic<int>* exhausted, std::atomic<int>* done)
      : exhausted_(exhausted), done_(done) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    stub->async()->Resolve(&context_, &request, this);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }
  void OnDone(const grpc::Status& status) override {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++*exhausted_;
    ++*done_;
  }

 private:
  grpc::ClientContext context_;
  std::atomic<int>* const exhausted_;
  std::atomic<int>* const done_;
};

// A stub on its own connection whose client keeps to HTTP/2's initial 64 KiB window per
// stream (no BDP probing to widen it), so what a stream's reader does not read stays queued in
// the daemon, as with any client that stops reading.
std::unique_ptr<v1::KernelCache::Stub> NarrowWindowStub(const std::string& address,
                                                        int connection) {
  grpc::ChannelArguments args;
  args.SetInt("kcache.test.connection", connection);  // distinct args: no shared connection
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
  return v1::KernelCache::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

TEST(HostileClientsTest, AbandonedResolveStreamsStayWithinTheDaemonsBounds) {
  const char* env = std::getenv("KCACHE_TEST_ABANDONED_STREAMS");
  const int streams = env != nullptr ? std::atoi(env) : 1500;
  // kcached's defaults: --max-calls-in-flight 1024 and --queued-max-bytes 256MiB, which 256 unread
  // streams of a 1 MiB artifact fill (one chunk each).
  constexpr int kMaxHolding = 256;
  DaemonProcess daemon;
  KernelRecord record = ::kcache::testing::Record("big", "// big\n");
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(daemon.store_path());
    ASSERT_TRUE(store.ok()) << store.status();
    ::kcache::testing::PutSynthetic(**store, record, "sm_86", std::string(1 << 20, 'x'));
  }
  daemon.options().extra_flags = {"--no-toolkit"};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  v1::ResolveRequest request;
  request.set_kernel_id(std::string(record.id.Bytes()));
  request.mutable_device()->set_sm_major(8);
  request.mutable_device()->set_sm_minor(6);
  auto stub = ::kcache::testing::NewStub(daemon.address());
  ASSERT_TRUE(::kcache::testing::CallResolve(*stub, request).status.ok());  // now in memory
  uint64_t rss_before = RssBytes(daemon.pid());

  // Many connections, as many clients would open.
  std::vector<std::unique_ptr<v1::KernelCache::Stub>> stubs;
  for (int i = 0; i < 16; ++i) stubs.push_back(NarrowWindowStub(daemon.address(), i));
  std::atomic<int> exhausted{0};
  std::atomic<int> done{0};
  std::vector<std::unique_ptr<AbandonedStream>> open;
  for (int i = 0; i < streams; ++i) {
    open.push_back(std::make_unique<AbandonedStream>(stubs[i % stubs.size()].get(), request,
                                                     &exhausted, &done));
  }
  // Every call reached the daemon: admitted (a Resolve counted) or refused at the bound.
  auto arrived = [&] {
    uint64_t resolves = StatCounter(*stub, "resolve.requests");
    uint64_t refused = StatCounter(*stub, "calls.refused_busy");
    return resolves != UINT64_MAX && refused != UINT64_MAX &&
           resolves - 1 + refused >= static_cast<uint64_t>(streams);
  };
  bool all_arrived = WaitFor(arrived);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // writes queue up
  uint64_t rss_after = RssBytes(daemon.pid());
  uint64_t refused =
      StatCounter(*stub, "calls.refused_busy") + StatCounter(*stub, "resolve.refused_queued_bytes");
  std::printf(
      "kcached RSS %llu MiB before, %llu MiB with %d abandoned Resolve streams of a 1 MiB "
      "artifact (%llu refused RESOURCE_EXHAUSTED)\n",
      static_cast<unsigned long long>(rss_before >> 20),
      static_cast<unsigned long long>(rss_after >> 20), streams,
      static_cast<unsigned long long>(refused));
  EXPECT_TRUE(all_arrived) << daemon.Log();
  if (streams > kMaxHolding) {
    EXPECT_GE(refused, static_cast<uint64_t>(streams - kMaxHolding));
    EXPECT_TRUE(WaitFor([&] { return exhausted.load() >= static_cast<int>(refused); }))
        << exhausted.load() << " of the " << refused << " calls refused saw RESOURCE_EXHAUSTED";
  }
  // Each call used to hold two copies of its chunk (about 2 MiB here): 1500 streams took
  // more than 2 GiB. Now the streams share the artifact and hold little else.
  EXPECT_LT(rss_after - std::min(rss_after, rss_before), uint64_t{400} << 20);

  // The daemon still answers, and everything is released once the clients go.
  for (auto& s : open) s->Cancel();
  EXPECT_TRUE(WaitFor([&] { return done.load() == streams; }));
  ::kcache::testing::ResolveOutcome again = ::kcache::testing::CallResolve(*stub, request);
  EXPECT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_EQ(again.bytes.size(), size_t{1} << 20);
  open.clear();
}

TEST(HostileClientsTest, PastTheQueuedBytesBoundResolveIsRefusedAndSaysWhatToDo) {
  DaemonProcess daemon;
  KernelRecord record = ::kcache::testing::Record("big", "// big\n");
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(daemon.store_path());
    ASSERT_TRUE(store.ok()) << store.status();
    ::kcache::testing::PutSynthetic(**store, record, "sm_86", std::string(3 << 20, 'x'));
  }
  int port = ::kcache::testing::FreePort();
  daemon.options().extra_flags = {"--no-toolkit", "--queued-max-bytes", "2MiB", "--probe-port",
                                  std::to_string(port)};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  v1::ResolveRequest request;
  request.set_kernel_id(std::string(record.id.Bytes()));
  request.mutable_device()->set_sm_major(8);
  request.mutable_device()->set_sm_minor(6);
  auto stub = ::kcache::testing::NewStub(daemon.address());
  auto unread = NarrowWindowStub(daemon.address(), 0);
  std::atomic<int> exhausted{0};
  std::atomic<int> done{0};
  // Two unread streams hold the two MiB; the third is refused.
  std::vector<std::unique_ptr<AbandonedStream>> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(std::make_unique<AbandonedStream>(unread.get(), request, &exhausted, &done));
  }
  // Each answered stream holds its chunk (1 MiB) of the bound until its reader reads it.
  ASSERT_TRUE(WaitFor([&] {
    return ::kcache::testing::ScrapeSample(port, "kcache_queued_bytes") >= (2 << 20);
  })) << daemon.Log();
  ::kcache::testing::ResolveOutcome third =
      ::kcache::testing::CallResolve(*stub, request, std::chrono::seconds(10));
  EXPECT_EQ(third.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Contains(third.status.error_message(), "--queued-max-bytes"))
      << third.status.error_message();
  EXPECT_EQ(StatCounter(*stub, "resolve.refused_queued_bytes"), 1u);
  // Once a reader goes, a call gets the whole artifact. The daemon gives the reader's bytes
  // back when its side of the cancelled stream ends, which may come after the client's: until
  // then a call is still refused (by the bound, never otherwise).
  open[0]->Cancel();
  ASSERT_TRUE(WaitFor([&] { return done.load() == 1; }));
  ::kcache::testing::ResolveOutcome fourth;
  EXPECT_TRUE(WaitFor(
      [&] {
        fourth = ::kcache::testing::CallResolve(*stub, request);
        return fourth.status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
      },
      std::chrono::seconds(10)));
  EXPECT_TRUE(fourth.status.ok()) << fourth.status.error_message();
  EXPECT_EQ(fourth.bytes.size(), size_t{3} << 20);
  for (auto& s : open) s->Cancel();
  EXPECT_TRUE(WaitFor([&] { return done.load() == 2; }));
}

TEST(HostileClientsTest, IdleProbeConnectionsDoNotStarveHealthChecks) {
  int port = ::kcache::testing::FreePort();
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit", "--probe-port", std::to_string(port)};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    int fd = ::kcache::testing::ConnectLoopback(port);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  int passed = 0;
  for (int i = 0; i < 20; ++i) {
    ::kcache::testing::HttpResponse health = ::kcache::testing::HttpGet(port, "/healthz");
    if (health.status == 200) ++passed;
  }
  absl::StatusOr<::kcache::testing::HealthStatus> grpc_health =
      ::kcache::testing::CheckHealth(absl::StrCat("127.0.0.1:", port));
  std::printf("health checks passed with 100 idle probe connections: %d of 20 HTTP, gRPC %s\n",
              passed, grpc_health.ok() ? "ok" : "failed");
  EXPECT_EQ(passed, 20);
  ASSERT_TRUE(grpc_health.ok()) << grpc_health.status();
  EXPECT_EQ(*grpc_health, ::kcache::testing::HealthStatus::kServing);
  // Past the bound of waiting connections (256) the oldest make room for the new.
  for (int i = 0; i < 300; ++i) {
    int fd = ::kcache::testing::ConnectLoopback(port);
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_EQ(::kcache::testing::HttpGet(port, "/healthz").status, 200);
  for (int fd : idle) close(fd);
}

// kcached's CPU seconds so far (utime + stime of /proc/PID/stat).
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> fields = absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
  return (std::stod(fields[11]) + std::stod(fields[12])) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// kcached out of descriptors (its limit lowered to what it holds, and connections past it held
// open on its main socket and its probe port): they wait in the backlog, and its accept loops
// rest instead of spinning a core; once they close, it serves again.
// Dials the unix socket `path` (SOCK_STREAM or SOCK_SEQPACKET); -1 when it does not connect.
int DialUnix(const std::string& path, int type) {
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) return fd;
  close(fd);
  return -1;
}

// kcached short of descriptors: clients never get its last ones (gRPC met EMFILE setting up a
// channel and freed it twice; RocksDB or a compile worker would be next), no accept loop
// spins, each put-off accept is counted, and every connection waiting is served once
// descriptors are back.
TEST(HostileClientsTest, OutOfDescriptorsItsAcceptLoopsDoNotSpin) {
  int port = ::kcache::testing::FreePort();
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit", "--probe-port", std::to_string(port)};
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  size_t holds = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", daemon.pid(), "/fd"))) {
    (void)entry;
    ++holds;
  }
  rlimit was{};
  ASSERT_EQ(prlimit(daemon.pid(), RLIMIT_NOFILE, nullptr, &was), 0) << strerror(errno);
  rlimit low{holds + 4, was.rlim_max};  // the soft limit only: raised again without privilege
  ASSERT_EQ(prlimit(daemon.pid(), RLIMIT_NOFILE, &low, nullptr), 0) << strerror(errno);
  std::string main_socket = daemon.address().substr(strlen("unix://"));
  std::vector<int> held;
  for (int i = 0; i < 40; ++i) {
    for (int fd : {::kcache::testing::ConnectLoopback(port), DialUnix(main_socket, SOCK_STREAM),
                   DialUnix(daemon.socket_path() + ".fast", SOCK_SEQPACKET)}) {
      if (fd >= 0) held.push_back(fd);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double before = CpuSeconds(daemon.pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  double spent = CpuSeconds(daemon.pid()) - before;
  std::printf("kcached out of descriptors, %zu connections waiting: %.2f CPU s in 2 s\n",
              held.size(), spent);
  EXPECT_LT(spent, 0.5) << "an accept loop spins while descriptors are out";
  EXPECT_GE(held.size(), 100u) << "the connections wait in the backlogs";
  ASSERT_EQ(prlimit(daemon.pid(), RLIMIT_NOFILE, &was, nullptr), 0) << strerror(errno);
  ::kcache::testing::HttpResponse metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = ::kcache::testing::HttpGet(port, "/metrics");
    return metrics.status == 200;
  })) << daemon.Log();
  for (const char* socket : {"main", "probe", "fast"}) {
    std::string sample = absl::StrCat("kcache_accept_failures_total{socket=\"", socket, "\"} ");
    size_t at = metrics.body.find(sample);
    ASSERT_NE(at, std::string::npos) << sample << " missing from\n" << metrics.body;
    EXPECT_NE(metrics.body.substr(at + sample.size(), 2), "0\n") << sample << "counted nothing";
  }
  absl::StatusOr<::kcache::testing::HealthStatus> health =
      ::kcache::testing::CheckHealth(daemon.address());
  ASSERT_TRUE(health.ok()) << health.status() << "\n" << daemon.Log();
  EXPECT_EQ(*health, ::kcache::testing::HealthStatus::kServing);
  for (int fd : held) close(fd);
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
}

TEST(HostileClientsTest, HerdOfGetsAllSucceedWithOneCompile) {
  DaemonProcess daemon;
  KernelRecord record = ::kcache::testing::Record("saxpy", ::kcache::testing::kSaxpySource);
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(daemon.store_path());
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutKernel(record).ok());  // known, never compiled
  }
  absl::Status started = daemon.Start();
  ASSERT_TRUE(started.ok()) << daemon.Log();
  if (Contains(daemon.Log(), "serve-only")) GTEST_SKIP() << "no CUDA toolkit to compile with";
  constexpr int kHerd = 64;
  std::vector<::kcache::testing::RunResult> results(kHerd);
  std::vector<std::thread> herd;
  for (int i = 0; i < kHerd; ++i) {
    herd.emplace_back([&, i] {
      results[i] = ::kcache::testing::Run(::kcache::testing::KcacheCli() +
                                          " get --device 8.6 --kernel saxpy --timeout 60"
                                          " --server " +
                                          daemon.address());
    });
  }
  for (std::thread& t : herd) t.join();
  int succeeded = 0;
  for (const ::kcache::testing::RunResult& r : results) {
    if (r.exit_code == 0) {
      ++succeeded;
    } else {
      ADD_FAILURE() << r.output;
    }
  }
  auto stub = ::kcache::testing::NewStub(daemon.address());
  uint64_t compiles = StatCounter(*stub, "compile.runs");
  std::printf("herd of %d `kcache get --server`: %d succeeded, %llu compile(s)\n", kHerd, succeeded,
              static_cast<unsigned long long>(compiles));
  EXPECT_EQ(succeeded, kHerd);
  EXPECT_EQ(compiles, 1u);
}

TEST(HostileClientsTest, WarmThroughTheDaemonSendsAManifestOver4MiBInBatches) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  if (Contains(daemon.Log(), "serve-only")) GTEST_SKIP() << "no CUDA toolkit to compile with";
  ::kcache::testing::TempDir dir;
  std::string manifest = "version: 1\nkernels:\n";
  std::string padding = "//" + std::string(1100 * 1000, ' ') + "\n";  // 1.1 MB of comment
  for (int i = 0; i < 5; ++i) {
    std::string name = absl::StrCat("k", i);
    dir.Write(name + ".cu", padding + absl::StrCat("extern \"C\" __global__ void ", name,
                                                   "(float* x) { x[0] = ", i, "; }\n"));
    absl::StrAppend(&manifest, "  - name: ", name, "\n    source: ", name, ".cu\n");
  }
  std::string path = dir.Write("manifest.yaml", manifest);
  ::kcache::testing::RunResult warm =
      ::kcache::testing::Run(::kcache::testing::KcacheCli() + " warm --arch 8.6 --server " +
                             daemon.address() + " " + path);
  EXPECT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_TRUE(Contains(warm.output, "[5/5]")) << warm.output;
  EXPECT_FALSE(Contains(warm.output, "larger than max")) << warm.output;
  auto stub = ::kcache::testing::NewStub(daemon.address());
  EXPECT_EQ(StatCounter(*stub, "compile.runs"), 5u);
}

// A batch of 200 kernels that all need a compile holds at most 4 of the daemon's threads (a
// stored kernel asked for meanwhile is answered at once), and once its client cancels, the
// compiles nobody else waits for are dropped instead of all 200 being built.
TEST(HostileClientsTest, ABatchOfCompilesNeitherStarvesOthersNorOutlivesItsCancel) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  if (Contains(daemon.Log(), "serve-only")) GTEST_SKIP() << "no CUDA toolkit to compile with";
  auto stub = ::kcache::testing::NewStub(daemon.address());
  v1::ResolveRequest stored = ::kcache::testing::ResolveSpec(
      ::kcache::testing::WireSpec("saxpy", ::kcache::testing::kSaxpySource), 8, 9);
  ASSERT_TRUE(::kcache::testing::CallResolve(*stub, stored).status.ok()) << daemon.Log();

  constexpr int kEntries = 200;
  v1::ResolveManyRequest batch;
  for (int i = 0; i < kEntries; ++i) {
    *batch.add_kernels() = ::kcache::testing::ResolveSpec(
        ::kcache::testing::WireSpec(absl::StrCat("slow", i),
                                    absl::StrCat("// ", i, "\n", ::kcache::testing::kSlowSource)),
        8, 9);
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::ResolveManyResponse>> reader =
      stub->ResolveMany(&context, batch);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // its compiles are under way

  auto start = std::chrono::steady_clock::now();
  ::kcache::testing::ResolveOutcome hit = ::kcache::testing::CallResolve(*stub, stored);
  double hit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(hit.status.ok()) << hit.status.error_message();
  EXPECT_EQ(hit.header.tier(), v1::TIER_MEMORY);
  EXPECT_LT(hit_seconds, 2.0) << "a stored kernel waited behind another client's batch";

  context.TryCancel();
  v1::ResolveManyResponse part;
  while (reader->Read(&part)) {
  }
  reader->Finish();
  // Wait until the compiles stop (no new one for 3 s), then count them.
  uint64_t runs = StatCounter(*stub, "compile.runs");
  for (int quiet = 0, waited = 0; quiet < 6 && waited < 240; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    uint64_t now = StatCounter(*stub, "compile.runs");
    quiet = now == runs ? quiet + 1 : 0;
    runs = now;
  }
  std::printf("batch of %d compiles cancelled: %llu compile(s) ran\n", kEntries,
              static_cast<unsigned long long>(runs));
  EXPECT_LT(runs, 1u + 12u) << "the cancelled batch's compiles went on";
}

}  // namespace
}  // namespace kcache
