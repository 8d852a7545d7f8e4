// libkcache against a real kcached on a temp unix socket: resolving by source, name and id,
// a > 4 MiB artifact reassembled from chunks, failing open when the daemon dies or stalls,
// the circuit breaker, and device detection on a machine without a driver.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>
#include <vector>

#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "engine/store/store.h"
#include "kcache/device.h"
#include "kcache/kcache.h"
#include "tests/testutil/client_kernels.h"
#include "tests/testutil/daemon_process.h"

namespace kcache {
namespace {

using client::BreakerState;
using client::Client;
using client::ClientOptions;
using client::Device;
using client::FetchedKernel;
using client::KernelSource;
using client::ServedFrom;
using client::ServeRule;
using ::kcache::testing::DaemonProcess;
using Clock = std::chrono::steady_clock;

constexpr Device kSm89{8, 9, 13000};

KernelSource Saxpy() { return ::kcache::testing::SaxpySource(); }

KernelSource Scale() { return ::kcache::testing::ScaleSource(80); }

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

std::unique_ptr<Client> Connect(const std::string& address, ClientOptions options = {}) {
  options.address = address;
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

ClientOptions Patient() {  // room for the daemon's first compiles on a busy 2-core machine
  ClientOptions o;
  o.deadline = absl::Seconds(30);
  o.local_compile_fallback = false;
  return o;
}

class ClientTest : public ::testing::Test {
 protected:
  void StartDaemon() { ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log(); }
  DaemonProcess daemon_;
};

TEST_F(ClientTest, ResolvesBySourceCompilingOnceThenFromMemory) {
  StartDaemon();
  std::unique_ptr<Client> c = Connect(daemon_.address(), Patient());
  absl::StatusOr<FetchedKernel> first = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(first.ok()) << first.status() << "\n" << daemon_.Log();
  EXPECT_EQ(first->served_from, ServedFrom::kDaemonCompile);
  EXPECT_EQ(first->rule, ServeRule::kCompiled);
  EXPECT_EQ(first->kind, client::ArtifactKind::kCubin);
  EXPECT_EQ(first->target, "sm_89");
  EXPECT_EQ(first->kernel_id, client::LocalCompiler::KernelIdOf(Saxpy()));
  EXPECT_EQ(first->data().substr(0, 4),
            "\x7f"
            "ELF");

  absl::StatusOr<FetchedKernel> again = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->served_from, ServedFrom::kDaemonMemory);
  EXPECT_EQ(again->rule, ServeRule::kExactSass);
  EXPECT_EQ(again->data(), first->data());
  std::printf("resolve: first (daemon compiles) %lld us, warm hit %lld us\n",
              static_cast<long long>(first->micros), static_cast<long long>(again->micros));
}

TEST_F(ClientTest, DefaultAddressIsKcacheAddressFromTheEnvironment) {
  StartDaemon();
  setenv("KCACHE_ADDRESS", daemon_.address().c_str(), 1);
  ClientOptions options = Patient();  // made while it is set: reads it
  unsetenv("KCACHE_ADDRESS");
  EXPECT_EQ(options.address, daemon_.address());
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<client::DaemonStats> stats = (*c)->Stat();
  EXPECT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(ClientOptions().address, client::kDefaultAddress);  // unset: the fixed path
  setenv("KCACHE_ADDRESS", "", 1);
  EXPECT_EQ(ClientOptions().address, client::kDefaultAddress);  // empty: as unset
  unsetenv("KCACHE_ADDRESS");
}

TEST_F(ClientTest, ResolvesByNameAndByIdAfterWarmThroughTheDaemon) {
  StartDaemon();
  std::unique_ptr<Client> c = Connect(daemon_.address(), Patient());
  std::vector<client::WarmJobEvent> events;
  absl::StatusOr<client::WarmTotals> totals =
      c->Warm({Saxpy(), Scale()}, {"8.6"}, 1, absl::Seconds(120),
              [&](const client::WarmJobEvent& e) { events.push_back(e); });
  ASSERT_TRUE(totals.ok()) << totals.status() << "\n" << daemon_.Log();
  EXPECT_EQ(totals->built, 2u);
  EXPECT_EQ(events.size(), 2u);

  absl::StatusOr<FetchedKernel> by_name = c->ResolveByName("scale", kSm89);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->rule, ServeRule::kCompatibleSass);  // sm_86 runs on 8.9
  EXPECT_EQ(by_name->target, "sm_86");
  EXPECT_TRUE(by_name->from_daemon());
  EXPECT_FALSE(by_name->LoweredName("scale<float>").empty());

  absl::StatusOr<FetchedKernel> by_id =
      c->ResolveById(client::LocalCompiler::KernelIdOf(Saxpy()), Device{8, 6, 13000});
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_EQ(by_id->rule, ServeRule::kExactSass);
  EXPECT_EQ(by_id->kernel_name, "saxpy");

  absl::StatusOr<FetchedKernel> unknown = c->ResolveByName("no_such_kernel", kSm89);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
  absl::StatusOr<FetchedKernel> bad_id = c->ResolveById("12ab", kSm89);
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, ArtifactOverFourMibArrivesIntactFromChunks) {
  KernelRecord record;
  record.spec.name = "big";
  record.spec.source = "extern \"C\" __global__ void big() {}\n";
  record.id = ComputeKernelId(record.spec);
  Artifact artifact;
  artifact.meta.key = ArtifactKey{record.id, ArtifactKind::kCubin,
                                  Target{TargetKind::kSass, Sm{8, 9}}, "nvrtc-test", 0};
  artifact.meta.kernel_name = "big";
  std::mt19937_64 random(42);
  artifact.bytes.resize((5u << 20) + 12345);
  for (char& c : artifact.bytes) c = static_cast<char>(random());
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(daemon_.store_path());
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutKernel(record).ok());
    ASSERT_TRUE((*store)->Put(artifact).ok());
  }
  StartDaemon();
  std::unique_ptr<Client> c = Connect(daemon_.address(), Patient());
  absl::StatusOr<FetchedKernel> big = c->ResolveById(record.id.Hex(), kSm89);
  ASSERT_TRUE(big.ok()) << big.status() << "\n" << daemon_.Log();
  EXPECT_EQ(big->data().size(), artifact.bytes.size());
  EXPECT_TRUE(big->data() == artifact.bytes);
  std::printf("5 MiB artifact over the socket: %lld us\n", static_cast<long long>(big->micros));
}

TEST_F(ClientTest, ManyThreadsShareOneClient) {
  StartDaemon();
  std::unique_ptr<Client> c = Connect(daemon_.address(), Patient());
  std::vector<std::string> bytes(16);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bytes.size(); ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<FetchedKernel> k = c->Resolve(Saxpy(), kSm89);
      if (k.ok()) bytes[i] = std::string(k->data());
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& b : bytes) {
    EXPECT_FALSE(b.empty());
    EXPECT_EQ(b, bytes[0]);
  }
}

TEST_F(ClientTest, DaemonKilledMidRunFallsBackToLocalCompileWithinDeadline) {
  StartDaemon();
  ClientOptions options;  // the defaults a worker gets: 2 s deadline, fallback on
  options.deadline = absl::Seconds(2);
  std::unique_ptr<Client> c = Connect(daemon_.address(), options);
  ASSERT_TRUE(c->Resolve(Saxpy(), kSm89).ok());  // the connection is up
  daemon_.Kill(SIGKILL);
  daemon_.Wait();

  Clock::time_point start = Clock::now();
  absl::StatusOr<FetchedKernel> k = c->Resolve(Scale(), kSm89);
  int64_t ms = MillisSince(start);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->served_from, ServedFrom::kLocalCompile);
  EXPECT_EQ(k->rule, ServeRule::kCompiled);
  EXPECT_EQ(k->target, "sm_89");
  EXPECT_NE(k->reason.find("kcached"), std::string::npos) << k->reason;
  std::printf("daemon killed: local compile fallback returned in %lld ms (deadline 2000)\n",
              static_cast<long long>(ms));
}

TEST_F(ClientTest, BreakerOpensOnStalledDaemonThenClosesWhenItAnswers) {
  StartDaemon();
  ClientOptions options;
  options.deadline = absl::Milliseconds(300);
  options.breaker_failures = 2;
  options.breaker_cooldown = absl::Seconds(1);
  std::unique_ptr<Client> c = Connect(daemon_.address(), options);
  // Warm the daemon's memory tier with a patient client first.
  ASSERT_TRUE(Connect(daemon_.address(), Patient())->Resolve(Saxpy(), kSm89).ok());
  ASSERT_TRUE(c->Resolve(Saxpy(), kSm89).ok());

  // Alive, accepting, never answering.
  ASSERT_TRUE(daemon_.Pause()) << "kcached did not stop on SIGSTOP";
  for (int i = 0; i < 2; ++i) {
    Clock::time_point start = Clock::now();
    absl::StatusOr<FetchedKernel> k = c->Resolve(Saxpy(), kSm89);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->served_from, ServedFrom::kLocalCompile);
    EXPECT_GE(MillisSince(start), 290) << "call " << i << " should have waited for the deadline";
  }
  EXPECT_EQ(c->breaker_state(), BreakerState::kOpen);

  Clock::time_point start = Clock::now();
  absl::StatusOr<FetchedKernel> skipped = c->ResolveByName("saxpy", kSm89);
  int64_t skipped_ms = MillisSince(start);
  EXPECT_EQ(skipped.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(skipped.status().message().find("circuit is open"), std::string::npos);
  // The message proves the call never went to the daemon (so it did not wait the deadline).
  absl::StatusOr<FetchedKernel> local = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->served_from, ServedFrom::kLocalCompile);
  EXPECT_NE(local->reason.find("circuit open"), std::string::npos) << local->reason;
  std::printf("breaker open: a daemon-only call failed in %lld ms (deadline 300)\n",
              static_cast<long long>(skipped_ms));

  daemon_.Kill(SIGCONT);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  absl::StatusOr<FetchedKernel> probe = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_TRUE(probe->from_daemon());
  EXPECT_EQ(c->breaker_state(), BreakerState::kClosed);
}

TEST_F(ClientTest, BreakerClosesWhenARestartedDaemonIsBack) {
  StartDaemon();
  ClientOptions options = Patient();
  options.breaker_failures = 2;
  options.breaker_cooldown = absl::Milliseconds(500);
  std::unique_ptr<Client> c = Connect(daemon_.address(), options);
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(c->Resolve(Saxpy(), kSm89).status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(c->breaker_state(), BreakerState::kOpen);
  StartDaemon();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  absl::StatusOr<FetchedKernel> k = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(k.ok()) << k.status() << "\n" << daemon_.Log();
  EXPECT_TRUE(k->from_daemon());
  EXPECT_EQ(c->breaker_state(), BreakerState::kClosed);
  // Not this test's subject, and slow: after a restart, kcached's SIGTERM shutdown can wait
  // out DaemonProcess::Stop's 10 s grace (a health-check connection left over from Start).
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
}

TEST_F(ClientTest, NotFoundFromALiveDaemonIsAnAnswerNotABreakerFailure) {
  StartDaemon();
  ClientOptions options = Patient();
  options.local_compile_fallback = true;
  options.breaker_failures = 1;
  std::unique_ptr<Client> c = Connect(daemon_.address(), options);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c->ResolveByName("no_such_kernel", kSm89).status().code(),
              absl::StatusCode::kNotFound);
  }
  KernelSource fp8_only = Saxpy();
  fp8_only.min_arch = 89;
  absl::StatusOr<FetchedKernel> below = c->Resolve(fp8_only, Device{8, 6, 13000});
  EXPECT_EQ(below.status().code(), absl::StatusCode::kNotFound) << below.status();
  EXPECT_EQ(c->breaker_state(), BreakerState::kClosed);
}

TEST(ClientNoDaemonTest, ASpecOverTheCoreLimitsIsRefusedBeforeAnyCall) {
  ::kcache::testing::TempDir dir;
  std::unique_ptr<Client> c = Connect("unix://" + (dir / "absent.sock"), ClientOptions{});
  KernelSource huge = Saxpy();
  huge.source.append(3u << 20, ' ');
  absl::StatusOr<FetchedKernel> k = c->Resolve(huge, kSm89);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << k.status();
  EXPECT_NE(k.status().message().find("the limit is 3145728"), std::string::npos) << k.status();
  EXPECT_EQ(c->breaker_state(), BreakerState::kClosed);  // the daemon was never asked
}

TEST(ClientNoDaemonTest, WithoutFallbackUnavailableComesQuickly) {
  ::kcache::testing::TempDir dir;
  ClientOptions options;
  options.local_compile_fallback = false;
  options.startup_grace = absl::ZeroDuration();  // else it first waits for kcached to appear
  std::unique_ptr<Client> c = Connect("unix://" + (dir / "absent.sock"), options);
  Clock::time_point start = Clock::now();
  absl::StatusOr<FetchedKernel> k = c->Resolve(Saxpy(), kSm89);
  int64_t ms = MillisSince(start);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnavailable) << k.status();
  EXPECT_NE(k.status().message().find("is kcached running"), std::string::npos) << k.status();
  std::printf("no daemon, no fallback: Unavailable in %lld ms (deadline 2000)\n",
              static_cast<long long>(ms));
}

// libkcache's own compile reports what the daemon's would: the engine's rule (SASS compiled
// for the device; PTX for a device beyond the toolkit is ptx_jit, not "compiled") and its
// reason, saying where it was compiled.
TEST(ClientNoDaemonTest, LocalCompileReportsTheEngineRuleAndReason) {
  ::kcache::testing::TempDir dir;
  ClientOptions options;
  options.startup_grace = absl::ZeroDuration();
  std::unique_ptr<Client> c = Connect("unix://" + (dir / "absent.sock"), options);
  absl::StatusOr<FetchedKernel> sass = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(sass.ok()) << sass.status();
  EXPECT_EQ(sass->served_from, ServedFrom::kLocalCompile);
  EXPECT_EQ(sass->rule, ServeRule::kCompiled);
  EXPECT_FALSE(sass->needs_jit);
  EXPECT_NE(sass->reason.find("compiled in this process with"), std::string::npos) << sass->reason;

  absl::StatusOr<FetchedKernel> ptx = c->Resolve(Saxpy(), Device{15, 0, 99000});
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(ptx->served_from, ServedFrom::kLocalCompile);
  EXPECT_EQ(ptx->rule, ServeRule::kPtxJit) << ptx->reason;
  EXPECT_TRUE(ptx->needs_jit);
  EXPECT_EQ(ptx->target.rfind("compute_", 0), 0u) << ptx->target;
}

TEST(ClientNoDaemonTest, ConnectRefusesBadOptionsAndNeverWaits) {
  ClientOptions bad;
  bad.deadline = absl::ZeroDuration();
  EXPECT_EQ(Client::Connect(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = ClientOptions();
  bad.address = "";
  EXPECT_EQ(Client::Connect(bad).status().code(), absl::StatusCode::kInvalidArgument);
  Clock::time_point start = Clock::now();
  EXPECT_TRUE(Client::Connect(ClientOptions()).ok());  // default socket: absent here
  EXPECT_LT(MillisSince(start), 100);
}

TEST(DeviceTest, DetectDevicesWithoutADriverSaysSoCleanly) {
  absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
  if (gpus.ok()) GTEST_SKIP() << "this machine has a GPU: " << (*gpus)[0].name;
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kNotFound) << gpus.status();
  EXPECT_NE(gpus.status().message().find("no CUDA driver"), std::string::npos) << gpus.status();
  EXPECT_EQ(client::DriverVersion().status().code(), absl::StatusCode::kNotFound);
  FetchedKernel kernel;
  kernel.bytes = "not a cubin";
  EXPECT_EQ(client::LoadedModule::Load(kernel).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client::DetectDevices().status(), gpus.status());  // asking again is the same
}

}  // namespace
}  // namespace kcache
