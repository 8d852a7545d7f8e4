// kcached end to end: the real binary on a temp unix socket (tests/testutil/daemon_process.h),
// driven through a raw kcache.v1 stub with default channel limits.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "core/artifact.h"
#include "core/cubin.h"
#include "core/manifest.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/http.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/synthetic.h"
#include "tests/testutil/tree_paths.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;

using ::kcache::testing::CallResolve;
using ::kcache::testing::DaemonOptions;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::kFakeToolkit;
using ::kcache::testing::PutSynthetic;
using ::kcache::testing::Record;
using ::kcache::testing::ResolveOutcome;
using ::kcache::testing::ResolveSpec;
using ::kcache::testing::StatCounter;
using ::kcache::testing::WaitFor;
using ::kcache::testing::WireSpec;

std::string FaultyWorker() {
  return testing::BinaryPath("engine/workers/kcache-compile-worker-faulty");
}

class DaemonTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> flags = {}) {
    daemon_.options().extra_flags = std::move(flags);
    absl::Status started = daemon_.Start();
    ASSERT_TRUE(started.ok()) << started;
    stub_ = ::kcache::testing::NewStub(daemon_.address());
  }
  std::unique_ptr<Store> OpenDaemonStore() {
    auto store = OpenStore(daemon_.store_path());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  // The daemon still answers (Stat) and its process runs.
  void ExpectAlive() {
    EXPECT_TRUE(daemon_.Running()) << daemon_.Log();
    EXPECT_NE(StatCounter(*stub_, "resolve.requests"), UINT64_MAX) << daemon_.Log();
  }

  DaemonProcess daemon_;
  std::unique_ptr<v1::KernelCache::Stub> stub_;
};

TEST_F(DaemonTest, ServesByTheRulesExactCompatiblePtxAndNeverNewerSass) {
  KernelRecord k = Record("k", "// k\n");
  KernelRecord newer = Record("newer", "// newer\n");
  KernelRecord fp8 = Record("fp8", "// fp8\n", 89);
  {
    std::unique_ptr<Store> store = OpenDaemonStore();
    ASSERT_NE(store, nullptr);
    PutSynthetic(*store, k, "sm_75");
    PutSynthetic(*store, k, "sm_86");
    PutSynthetic(*store, k, "compute_80");
    PutSynthetic(*store, newer, "sm_80");
    PutSynthetic(*store, newer, "sm_86");
    PutSynthetic(*store, newer, "compute_80");
    PutSynthetic(*store, fp8, "compute_75");  // loads on 8.6, but the kernel declares 8.9+
  }
  StartDaemon({"--no-toolkit"});
  auto by_id = [](const KernelRecord& r, uint32_t major, uint32_t minor) {
    v1::ResolveRequest request;
    request.set_kernel_id(std::string(r.id.Bytes()));
    request.mutable_device()->set_sm_major(major);
    request.mutable_device()->set_sm_minor(minor);
    request.mutable_device()->set_driver_version(13000);
    return request;
  };
  struct Case {
    const KernelRecord* kernel;
    uint32_t major, minor;
    v1::ServeRule rule;
    const char* target;
  };
  const Case cases[] = {
      {&k, 8, 6, v1::SERVE_RULE_EXACT_SASS, "sm_86"},
      {&k, 8, 9, v1::SERVE_RULE_COMPATIBLE_SASS, "sm_86"},
      {&k, 9, 0, v1::SERVE_RULE_PTX_JIT, "compute_80"},
      {&k, 7, 5, v1::SERVE_RULE_EXACT_SASS, "sm_75"},
  };
  for (const Case& c : cases) {
    ResolveOutcome out = CallResolve(*stub_, by_id(*c.kernel, c.major, c.minor));
    ASSERT_TRUE(out.status.ok()) << c.major << "." << c.minor << ": " << out.status.error_message();
    EXPECT_EQ(out.header.rule(), c.rule) << c.major << "." << c.minor;
    EXPECT_EQ(out.header.target(), c.target);
    EXPECT_EQ(out.header.needs_jit(), c.rule == v1::SERVE_RULE_PTX_JIT);
    EXPECT_EQ(out.bytes, std::string("synthetic ") + c.target);
    EXPECT_FALSE(out.header.reason().empty());
  }
  // SM 7.5 holds only 8.0+ code for `newer`: refused, never handed sm_80 / sm_86 SASS.
  ResolveOutcome old = CallResolve(*stub_, by_id(newer, 7, 5));
  EXPECT_EQ(old.status.error_code(), grpc::StatusCode::NOT_FOUND) << old.status.error_message();
  EXPECT_TRUE(old.bytes.empty());
  // Below the kernel's declared minimum: refused although compute_75 PTX would load.
  ResolveOutcome below = CallResolve(*stub_, by_id(fp8, 8, 6));
  EXPECT_EQ(below.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Contains(below.status.error_message(), "8.9")) << below.status.error_message();
}

TEST_F(DaemonTest, BakedStoreServesReadOnly) {
  ::kcache::testing::TempDir baked_dir;
  KernelRecord k = Record("baked", "// baked\n");
  {
    auto baked = OpenStore(baked_dir / "baked");
    ASSERT_TRUE(baked.ok()) << baked.status();
    PutSynthetic(**baked, k, "sm_89");
  }
  daemon_.options().baked = {baked_dir / "baked"};
  StartDaemon(
      {"--no-toolkit", "--warm-start-max-bytes", "0"});  // a store hit, not the warm's answer
  v1::ResolveRequest request;
  request.set_kernel_name("baked");
  request.mutable_device()->set_sm_major(8);
  request.mutable_device()->set_sm_minor(9);
  ResolveOutcome out = CallResolve(*stub_, request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.header.tier(), v1::TIER_BAKED_STORE);
  EXPECT_EQ(out.bytes, "synthetic sm_89");
}

TEST_F(DaemonTest, CompilesOnMissThenServesFromCache) {
  StartDaemon();
  v1::ResolveRequest request =
      ResolveSpec(WireSpec("saxpy", ::kcache::testing::kSaxpySource), 8, 6);
  ResolveOutcome first = CallResolve(*stub_, request);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message() << daemon_.Log();
  EXPECT_TRUE(first.header_first);
  EXPECT_EQ(first.header.rule(), v1::SERVE_RULE_COMPILED);
  EXPECT_EQ(first.header.tier(), v1::TIER_COMPILE);
  EXPECT_EQ(first.header.kind(), v1::ARTIFACT_KIND_CUBIN);
  EXPECT_EQ(first.header.size(), first.bytes.size());
  EXPECT_EQ(first.header.checksum(), PayloadChecksum(first.bytes));
  EXPECT_EQ(first.header.kernel_id(),
            std::string(Record("saxpy", ::kcache::testing::kSaxpySource).id.Bytes()));
  absl::StatusOr<int> sm = CubinSmArch(first.bytes);
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_EQ(*sm, 86);

  ResolveOutcome second = CallResolve(*stub_, request);
  ASSERT_TRUE(second.status.ok());
  EXPECT_EQ(second.header.rule(), v1::SERVE_RULE_EXACT_SASS);
  EXPECT_EQ(second.header.tier(), v1::TIER_MEMORY);
  EXPECT_EQ(second.bytes, first.bytes);
  EXPECT_EQ(StatCounter(*stub_, "compile.runs"), 1u);
}

TEST_F(DaemonTest, SixtyFourConcurrentResolvesCompileOnceAndGetIdenticalBytes) {
  StartDaemon();
  v1::ResolveRequest request =
      ResolveSpec(WireSpec("saxpy64", ::kcache::testing::kSaxpySource, {"-DUNWARMED=64"}), 8, 9);
  constexpr int kCalls = 64;
  std::vector<std::future<ResolveOutcome>> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(std::async(std::launch::async, [&] { return CallResolve(*stub_, request); }));
  }
  std::set<std::string> distinct;
  for (auto& call : calls) {
    ResolveOutcome out = call.get();
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.header.checksum(), PayloadChecksum(out.bytes));
    distinct.insert(out.bytes);
  }
  EXPECT_EQ(distinct.size(), 1u);
  EXPECT_EQ(StatCounter(*stub_, "compile.runs"), 1u);
  EXPECT_EQ(StatCounter(*stub_, "resolve.requests"), static_cast<uint64_t>(kCalls));
}

TEST_F(DaemonTest, ArtifactOverFourMiBStreamsIntactInChunks) {
  KernelRecord big = Record("big", "// big\n");
  std::string payload(5u << 20, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (char& c : payload) {  // not compressible, not uniform
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  {
    std::unique_ptr<Store> store = OpenDaemonStore();
    ASSERT_NE(store, nullptr);
    PutSynthetic(*store, big, "sm_90", payload);
  }
  StartDaemon({"--no-toolkit"});
  v1::ResolveRequest request;
  request.set_kernel_id(std::string(big.id.Bytes()));
  request.mutable_device()->set_sm_major(9);
  ResolveOutcome out = CallResolve(*stub_, request);  // default 4 MiB receive limit
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_TRUE(out.header_first);
  EXPECT_EQ(out.header.size(), payload.size());
  EXPECT_EQ(out.header.checksum(), PayloadChecksum(payload));
  EXPECT_EQ(PayloadChecksum(out.bytes), PayloadChecksum(payload));
  EXPECT_TRUE(out.bytes == payload);
  EXPECT_EQ(out.chunks, 5);
  // A stream this size once kept gRPC's graceful shutdown waiting on the idle client.
  auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon_.Stop(), 0) << daemon_.Log();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(3));
  EXPECT_LE(out.largest_chunk, 1u << 20);
}

TEST_F(DaemonTest, CompileErrorIsAbortedWithTheNvrtcLog) {
  StartDaemon();
  ResolveOutcome out = CallResolve(
      *stub_, ResolveSpec(WireSpec("broken", ::kcache::testing::kSyntaxErrorSource), 8, 6));
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_TRUE(Contains(out.status.error_message(), "undeclared_identifier"))
      << out.status.error_message();
  ExpectAlive();
}

TEST_F(DaemonTest, LongCompileLogIsCutToFitTheTrailer) {
  StartDaemon();
  std::string source = "extern \"C\" __global__ void many(float* y) {\n";
  for (int i = 0; i < 90; ++i) {
    // NVRTC quotes each bad line: the accents make the log percent-encode to ~3x its size,
    // so a cut by bytes alone would still overflow the 8 KiB trailer limit.
    std::string accents;
    for (int j = 0; j < 150; ++j) accents += "\u00e9";
    source += "  y[" + std::to_string(i) + "] = an_undeclared_identifier_with_a_long_name_" +
              std::to_string(i) + ";  // " + accents + "\n";
  }
  source += "}\n";
  ResolveOutcome out = CallResolve(*stub_, ResolveSpec(WireSpec("many", source), 8, 6));
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::ABORTED) << out.status.error_message();
  EXPECT_TRUE(Contains(out.status.error_message(), "an_undeclared_identifier_with_a_long_name_0"));
  EXPECT_TRUE(Contains(out.status.error_message(), "more bytes left out"));
  EXPECT_LE(out.status.error_message().size(), 4096u);
  ExpectAlive();
}

TEST_F(DaemonTest, CompileWorkerCrashFailsOnlyThatRequest) {
  StartDaemon({"--compile-worker", FaultyWorker(), "--compile-workers", "1"});
  ResolveOutcome crash = CallResolve(
      *stub_, ResolveSpec(WireSpec("crash", "// KCACHE_TEST_CRASH\n" +
                                                std::string(::kcache::testing::kSaxpySource)),
                          8, 6));
  EXPECT_EQ(crash.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(Contains(crash.status.error_message(), "crash")) << crash.status.error_message();
  ResolveOutcome next =
      CallResolve(*stub_, ResolveSpec(WireSpec("saxpy", ::kcache::testing::kSaxpySource), 8, 6));
  EXPECT_TRUE(next.status.ok()) << next.status.error_message();
  ExpectAlive();
}

TEST_F(DaemonTest, CompilePastItsTimeLimitFailsClearlyAndTheDaemonServesOn) {
  StartDaemon({"--compile-worker", FaultyWorker(), "--compile-timeout-seconds", "1"});
  auto started = std::chrono::steady_clock::now();
  ResolveOutcome hang = CallResolve(
      *stub_, ResolveSpec(WireSpec("hang", "// KCACHE_TEST_HANG\n" +
                                               std::string(::kcache::testing::kSaxpySource)),
                          8, 6));
  EXPECT_EQ(hang.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << hang.status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  ResolveOutcome next =
      CallResolve(*stub_, ResolveSpec(WireSpec("saxpy", ::kcache::testing::kSaxpySource), 8, 6));
  EXPECT_TRUE(next.status.ok()) << next.status.error_message();
  ExpectAlive();
  // Counted, and logged once, naming the kernel, the target and the limit.
  EXPECT_EQ(StatCounter(*stub_, "compile.limit_stops"), 1u);
  std::string log = daemon_.Log();
  size_t first = log.find("compile stopped by a limit: compile of hang");
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("compile stopped by a limit", first + 1), std::string::npos) << log;
  EXPECT_TRUE(Contains(log, "wall-clock limit")) << log;
}

TEST_F(DaemonTest, MalformedRequestsAreInvalidArgumentAndTheDaemonStaysUp) {
  StartDaemon({"--no-toolkit"});
  v1::KernelSpec saxpy = WireSpec("saxpy", ::kcache::testing::kSaxpySource);
  std::vector<std::pair<std::string, v1::ResolveRequest>> cases;
  {
    v1::ResolveRequest r = ResolveSpec(saxpy, 8, 6);
    r.clear_spec();
    cases.push_back({"no kernel", r});
  }
  {
    v1::ResolveRequest r = ResolveSpec(saxpy, 8, 6);
    r.set_kernel_id("short");
    cases.push_back({"kernel_id", r});
  }
  cases.push_back({"sm_major is 0", ResolveSpec(saxpy, 0, 0)});
  cases.push_back({"not a compute capability", ResolveSpec(saxpy, 99, 12)});
  cases.push_back({"-arch", ResolveSpec(WireSpec("a", "// a\n", {"-arch=sm_90"}), 8, 6)});
  cases.push_back(
      {"options", ResolveSpec(WireSpec("f", "// f\n", {"-fdevice-time-trace=/tmp/x"}), 8, 6)});
  cases.push_back({"NUL", ResolveSpec(WireSpec("nul", std::string("// a\0b\n", 7)), 8, 6)});
  cases.push_back({"source is empty", ResolveSpec(WireSpec("empty", ""), 8, 6)});
  cases.push_back({"min_arch", ResolveSpec(WireSpec("m", "// m\n", {}, 5), 8, 6)});
  cases.push_back(
      {"the limit is 3145728", ResolveSpec(WireSpec("huge", std::string(3500u << 10, 'x')), 8, 6)});
  for (const auto& [expected, request] : cases) {
    ResolveOutcome out = CallResolve(*stub_, request);
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << expected << ": " << out.status.error_message();
    EXPECT_TRUE(Contains(out.status.error_message(), expected))
        << expected << ": " << out.status.error_message();
  }
  // Refused at the front end, and counted: requests and invalid ones alike.
  EXPECT_EQ(StatCounter(*stub_, "resolve.invalid"), cases.size());
  EXPECT_EQ(StatCounter(*stub_, "resolve.requests"), cases.size());
  // Over gRPC's 4 MiB receive limit: refused by gRPC itself.
  ResolveOutcome oversized =
      CallResolve(*stub_, ResolveSpec(WireSpec("giant", std::string(5u << 20, 'x')), 8, 6));
  EXPECT_EQ(oversized.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << oversized.status.error_message();
  v1::WarmRequest warm;
  grpc::ClientContext context;
  auto reader = stub_->Warm(&context, warm);
  v1::WarmProgress progress;
  while (reader->Read(&progress)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Bytes that do not parse as a ResolveRequest: gRPC answers (UNIMPLEMENTED, its code for
  // an unparsable request) before the service sees them.
  {
    grpc::GenericStub generic(
        grpc::CreateChannel(daemon_.address(), grpc::InsecureChannelCredentials()));
    std::string garbage("\xff\xff\xff\xff\x0f", 5);
    grpc::Slice slice(garbage.data(), garbage.size());
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext raw_context;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&raw_context, "/kcache.v1.KernelCache/Resolve", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) { done.set_value(s); });
    EXPECT_FALSE(done.get_future().get().ok());
  }
  ExpectAlive();
}

TEST_F(DaemonTest, SocketIsCreatedWithMode0660InAFolderItCreates) {
  daemon_.options().socket = daemon_.dir() + "/run/kcache/kcache.sock";
  StartDaemon({"--no-toolkit"});
  struct stat st;
  ASSERT_EQ(stat(daemon_.socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(daemon_.Stop(), 0) << daemon_.Log();
  EXPECT_NE(access(daemon_.socket_path().c_str(), F_OK), 0) << "socket left behind";
}

TEST_F(DaemonTest, SocketModeFlagIsHonoured) {
  StartDaemon({"--no-toolkit", "--socket-mode", "0600"});
  struct stat st;
  ASSERT_EQ(stat(daemon_.socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(DaemonTest, StaleSocketIsReplacedButALiveDaemonIsNot) {
  StartDaemon({"--no-toolkit"});
  DaemonOptions second_options;
  second_options.socket = daemon_.socket_path();
  second_options.extra_flags = {"--no-toolkit"};
  DaemonProcess second(second_options);
  ASSERT_TRUE(second.Spawn().ok());
  EXPECT_EQ(second.Wait(std::chrono::seconds(30)), 1) << second.Log();
  EXPECT_TRUE(Contains(second.Log(), "listening on " + daemon_.socket_path())) << second.Log();
  ExpectAlive();

  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  struct stat st;
  ASSERT_EQ(stat(daemon_.socket_path().c_str(), &st), 0) << "SIGKILL should leave the socket";
  absl::Status restarted = daemon_.Start();
  ASSERT_TRUE(restarted.ok()) << restarted;
  EXPECT_TRUE(Contains(daemon_.Log(), "removed a stale socket")) << daemon_.Log();
  ExpectAlive();
}

// True once kcached (started with --probe-port `port`) is answering a gRPC call.
bool ACallIsInFlight(int port) {
  return WaitFor(
      [&] { return ::kcache::testing::ScrapeSample(port, "kcache_calls_in_flight") >= 1; });
}

TEST_F(DaemonTest, SigtermLetsAnInFlightCompileFinishAndExitsZero) {
  int port = ::kcache::testing::FreePort();
  StartDaemon({"--probe-port", std::to_string(port)});
  v1::ResolveRequest request = ResolveSpec(WireSpec("slow", ::kcache::testing::kSlowSource), 8, 6);
  auto call = std::async(std::launch::async, [&] { return CallResolve(*stub_, request); });
  ASSERT_TRUE(ACallIsInFlight(port)) << daemon_.Log();  // its compile is queued or running
  ASSERT_EQ(call.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the compile finished before SIGTERM: make kSlowSource slower";
  daemon_.Kill(SIGTERM);
  // Once kcached has read the signal, a new call (on a new connection) is refused...
  EXPECT_TRUE(WaitFor([&] {
    return StatCounter(*::kcache::testing::NewStub(daemon_.address()), "resolve.requests") ==
           UINT64_MAX;
  })) << "new calls were still accepted after SIGTERM";
  // ... while the compile in flight goes on.
  ASSERT_EQ(call.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  ResolveOutcome out = call.get();
  EXPECT_TRUE(out.status.ok()) << out.status.error_message() << daemon_.Log();
  EXPECT_EQ(out.header.rule(), v1::SERVE_RULE_COMPILED);
  EXPECT_EQ(daemon_.Wait(), 0) << daemon_.Log();
}

// The processes whose parent is `parent` (from /proc/<pid>/stat).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(text.substr(paren + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) children.push_back(std::stoi(name));
  }
  return children;
}

TEST_F(DaemonTest, SigtermPastTheGraceCancelsTheCallAndStopsItsCompileWorker) {
  int port = ::kcache::testing::FreePort();
  StartDaemon({"--compile-worker", FaultyWorker(), "--compile-workers", "1",
               "--shutdown-grace-seconds", "1", "--probe-port", std::to_string(port)});
  v1::ResolveRequest request = ResolveSpec(
      WireSpec("hang", "// KCACHE_TEST_HANG\n" + std::string(::kcache::testing::kSaxpySource)), 8,
      6);
  auto call = std::async(std::launch::async, [&] { return CallResolve(*stub_, request); });
  ASSERT_TRUE(ACallIsInFlight(port)) << daemon_.Log();
  std::vector<pid_t> workers = ChildrenOf(daemon_.pid());
  ASSERT_FALSE(workers.empty());
  auto stopping = std::chrono::steady_clock::now();
  daemon_.Kill(SIGTERM);
  ResolveOutcome out = call.get();
  // CANCELLED, as documented, not the UNAVAILABLE of a connection closed under the call.
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::CANCELLED) << out.status.error_message();
  EXPECT_NE(out.status.error_message().find("shutdown grace"), std::string::npos)
      << out.status.error_message();
  EXPECT_EQ(daemon_.Wait(std::chrono::seconds(20)), 0) << daemon_.Log();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(10));
  for (pid_t worker : workers) {
    EXPECT_TRUE(
        WaitFor([&] { return kill(worker, 0) != 0 && errno == ESRCH; }, std::chrono::seconds(2)))
        << "compile worker " << worker << " outlived the daemon";
  }
}

TEST_F(DaemonTest, WithoutToolkitServesStoredArtifactsAndRefusesMisses) {
  KernelRecord k = Record("stored", "// stored\n");
  {
    std::unique_ptr<Store> store = OpenDaemonStore();
    ASSERT_NE(store, nullptr);
    PutSynthetic(*store, k, "sm_86");
  }
  StartDaemon({"--no-toolkit"});
  ResolveOutcome hit = CallResolve(*stub_, ResolveSpec(WireSpec("stored", "// stored\n"), 8, 6));
  ASSERT_TRUE(hit.status.ok()) << hit.status.error_message();
  EXPECT_EQ(hit.bytes, "synthetic sm_86");
  ResolveOutcome miss =
      CallResolve(*stub_, ResolveSpec(WireSpec("saxpy", ::kcache::testing::kSaxpySource), 8, 6));
  EXPECT_EQ(miss.status.error_code(), grpc::StatusCode::NOT_FOUND);
  // --no-toolkit forbids compiling: the miss says so (not "no toolkit is loaded").
  EXPECT_TRUE(Contains(miss.status.error_message(), "compiling was not allowed"))
      << miss.status.error_message();
  EXPECT_EQ(StatCounter(*stub_, "miss.compile_not_allowed"), 1u);
  EXPECT_EQ(StatCounter(*stub_, "miss.no_toolkit"), 0u);

  v1::WarmRequest warm;
  *warm.add_kernels() = WireSpec("saxpy", ::kcache::testing::kSaxpySource);
  warm.add_targets("8.6");
  grpc::Status status = ::kcache::testing::CallWarm(*stub_, warm).status;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Contains(status.error_message(), "no CUDA toolkit")) << status.error_message();
}

TEST_F(DaemonTest, WarmStreamsProgressPerJobThenASummary) {
  StartDaemon();
  v1::WarmRequest warm;
  *warm.add_kernels() = WireSpec("saxpy", ::kcache::testing::kSaxpySource);
  v1::KernelSpec scale = WireSpec("scale", ::kcache::testing::kScaleTemplateSource, {}, 80);
  v1::Header* header = scale.add_headers();
  header->set_name("scale.cuh");
  header->set_content(::kcache::testing::kScaleHeader);
  scale.add_name_expressions("scale<float>");
  *warm.add_kernels() = scale;
  warm.add_targets("7.5");
  warm.add_targets("8.6");
  grpc::ClientContext context;
  auto reader = stub_->Warm(&context, warm);
  v1::WarmProgress progress;
  std::vector<v1::WarmJobDone> jobs;
  std::optional<v1::WarmSummary> summary;
  while (reader->Read(&progress)) {
    ASSERT_FALSE(summary.has_value()) << "a message after the summary";
    if (progress.has_job()) jobs.push_back(progress.job());
    if (progress.has_summary()) summary = progress.summary();
  }
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(jobs.size(), 4u);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(jobs[i].done(), i + 1);
    EXPECT_EQ(jobs[i].total(), 4u);
  }
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->built(), 3u);
  EXPECT_EQ(summary->skipped(), 1u);  // scale declares 8.0+: no 7.5 build
  EXPECT_EQ(summary->failed(), 0u);

  v1::ResolveRequest request = ResolveSpec(scale, 8, 6);
  ResolveOutcome out = CallResolve(*stub_, request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.header.rule(), v1::SERVE_RULE_EXACT_SASS);
  ASSERT_EQ(out.header.lowered_names_size(), 1);
  EXPECT_EQ(out.header.lowered_names(0).name_expression(), "scale<float>");
}

TEST_F(DaemonTest, ExportManifestLoadsBackWithTheAskedForKernels) {
  StartDaemon();
  v1::KernelSpec saxpy = WireSpec("saxpy", ::kcache::testing::kSaxpySource);
  v1::KernelSpec fast =
      WireSpec("Saxpy Fast!", ::kcache::testing::kSaxpySource, {"--use_fast_math"}, 75);
  ASSERT_TRUE(CallResolve(*stub_, ResolveSpec(saxpy, 8, 6)).status.ok());
  ASSERT_TRUE(CallResolve(*stub_, ResolveSpec(fast, 8, 9)).status.ok());
  grpc::ClientContext context;
  v1::ExportManifestResponse response;
  grpc::Status status = stub_->ExportManifest(&context, v1::ExportManifestRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.kernels(), 2u);
  ::kcache::testing::TempDir dir;
  absl::StatusOr<Manifest> manifest =
      LoadManifest(dir.Write("seen.yaml", response.manifest_yaml()));
  ASSERT_TRUE(manifest.ok()) << manifest.status() << "\n" << response.manifest_yaml();
  std::set<KernelId> ids;
  for (const ManifestKernel& kernel : manifest->kernels) ids.insert(kernel.record.id);
  KernelSpec fast_spec;
  fast_spec.source = ::kcache::testing::kSaxpySource;
  fast_spec.options = {"--use_fast_math"};
  EXPECT_EQ(ids, (std::set<KernelId>{Record("saxpy", ::kcache::testing::kSaxpySource).id,
                                     ComputeKernelId(fast_spec)}));
}

TEST_F(DaemonTest, SourcesThatAreNotUtf8CompileAndTheirLogsTravel) {
  StartDaemon();
  // A Latin-1 byte (0xA9, the copyright sign) in a comment: valid CUDA, invalid UTF-8.
  std::string latin1 = "// (\xa9 someone)\n" + std::string(::kcache::testing::kSaxpySource);
  ResolveOutcome out = CallResolve(*stub_, ResolveSpec(WireSpec("latin1", latin1), 8, 6));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.header.kernel_id(), std::string(Record("latin1", latin1).id.Bytes()));

  // A compile error on a line with that byte: NVRTC quotes it in the log a Warm job carries.
  v1::WarmRequest warm;
  *warm.add_kernels() =
      WireSpec("broken", "extern \"C\" __global__ void b(float* y) { y[0] = nope; }  // \xa9\n");
  warm.add_targets("8.6");
  grpc::ClientContext context;
  auto reader = stub_->Warm(&context, warm);
  v1::WarmProgress progress;
  std::string message;
  while (reader->Read(&progress)) {
    if (progress.has_job()) message = progress.job().message();
  }
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(Contains(message, "nope")) << message;

  // (Exporting it works on the wire; that the manifest gives back the same id for a source
  // that is not UTF-8 is core/manifest.cc's business: YAML text cannot hold such bytes.)
  grpc::ClientContext export_context;
  v1::ExportManifestResponse exported;
  status = stub_->ExportManifest(&export_context, v1::ExportManifestRequest(), &exported);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(exported.kernels(), 1u);
}

}  // namespace
}  // namespace kcache
