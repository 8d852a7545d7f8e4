// Deadlines that bound silence, not the whole wait (docs/client.md, "Deadlines"), against a
// real kcached whose compiles are made slow by the fault-injecting compile worker
// (KCACHE_TEST_SLEEP_MS): a default client is served a 5 s compile (C++ and the C ABI), every
// kernel of a batch with one slow compile is served, a daemon stopped in the middle of a
// compile is given up on after the deadline and the kernel compiled here, `kcache get` waits
// for a compile and prints where it is, an old-style request still gets its answer without
// progress messages, and a worker that asks before kcached listens is served by kcached (the
// start-up grace).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kcache/kcache.h"
#include "kcache/kcache_c.h"
#include "tests/testutil/client_kernels.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

using client::Client;
using client::ClientOptions;
using client::Device;
using client::FetchedKernel;
using client::KernelRef;
using client::KernelSource;
using client::ServedFrom;
using ::kcache::testing::DaemonProcess;
using Clock = std::chrono::steady_clock;

constexpr Device kSm89{8, 9, 13000};
constexpr int kSlowMillis = 5000;

// saxpy, made a kernel of its own by `tag`, whose compile in the test worker first sleeps
// `millis` (0: an ordinary compile).
KernelSource Saxpy(const std::string& tag, int millis = 0) {
  KernelSource s = ::kcache::testing::SaxpySource();
  s.name = "saxpy_" + tag;
  s.source = absl::StrCat(
      "// ", tag, millis > 0 ? absl::StrCat(" KCACHE_TEST_SLEEP_MS:", millis) : std::string(), "\n",
      s.source);
  return s;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<Client> DefaultClient(const std::string& address) {
  ClientOptions options;  // every default but the address
  options.address = address;
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

class ClientProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.options().extra_flags = {
        "--compile-worker", testing::BinaryPath("engine/workers/kcache-compile-worker-faulty"),
        "--compile-timeout-seconds", "60"};
  }
  void StartDaemon() {
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    if (daemon_.Log().find("serve-only") != std::string::npos) {
      GTEST_SKIP() << "no CUDA toolkit to compile with";
    }
  }
  DaemonProcess daemon_;
};

TEST_F(ClientProgressTest, ADefaultClientIsServedAFiveSecondCompile) {
  StartDaemon();
  std::unique_ptr<Client> client = DefaultClient(daemon_.address());
  auto start = Clock::now();
  absl::StatusOr<FetchedKernel> k = client->Resolve(Saxpy("five", kSlowMillis), kSm89);
  double seconds = SecondsSince(start);
  ASSERT_TRUE(k.ok()) << k.status() << "\n" << daemon_.Log();
  EXPECT_EQ(k->served_from, ServedFrom::kDaemonCompile) << k->reason;
  std::printf("a %d ms compile with a default client (2 s deadline): served in %.2f s\n",
              kSlowMillis, seconds);
}

TEST_F(ClientProgressTest, TheCAbiWithDefaultOptionsIsServedAFiveSecondCompile) {
  StartDaemon();
  kcache_options options;
  kcache_options_init(&options);
  EXPECT_EQ(options.wait_limit_ms, 0);
  std::string address = daemon_.address();
  options.address = address.c_str();
  kcache_client* c = nullptr;
  ASSERT_EQ(kcache_connect(&options, &c), KCACHE_OK) << kcache_last_error();
  KernelSource slow = Saxpy("c_abi", kSlowMillis);
  kcache_source source = {};
  source.name = slow.name.c_str();
  source.source = slow.source.c_str();
  kcache_device device = {8, 9, 13000};
  kcache_kernel* kernel = nullptr;
  ASSERT_EQ(kcache_resolve(c, &source, &device, &kernel), KCACHE_OK) << kcache_last_error();
  EXPECT_STREQ(kcache_kernel_served_from(kernel), "daemon:compile");
  kcache_kernel_free(kernel);
  kcache_client_free(c);
}

TEST_F(ClientProgressTest, EveryKernelOfABatchWithOneSlowCompileIsServed) {
  StartDaemon();
  std::unique_ptr<Client> client = DefaultClient(daemon_.address());
  std::vector<KernelRef> batch;
  for (int i = 0; i < 11; ++i) batch.emplace_back(Saxpy(absl::StrCat("batch", i)));
  batch.emplace_back(Saxpy("batch_slow", kSlowMillis));
  auto start = Clock::now();
  std::vector<absl::StatusOr<FetchedKernel>> results = client->ResolveMany(batch, kSm89);
  double seconds = SecondsSince(start);
  ASSERT_EQ(results.size(), 12u);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_TRUE(results[i]->from_daemon()) << i << ": " << results[i]->reason;
  }
  std::printf("a batch of 12 with one %d ms compile, default client: all served in %.2f s\n",
              kSlowMillis, seconds);
}

// `kcache get --server` with a 1 s deadline (--timeout) waits for a 3 s compile for the
// device: the kernel was warmed for another arch, so the daemon knows it by name.
// `kcache get --timeout 1` waits for a 3 s compile, and with --progress says where it is
// (compiling, and about how long the warm's compile of the same kernel for 7.5 took); without
// it, and stderr not a terminal, it says nothing of it.
TEST_F(ClientProgressTest, KcacheGetWaitsForACompileLongerThanItsTimeoutAndPrintsItsProgress) {
  StartDaemon();
  ::kcache::testing::TempDir dir;
  dir.Write("slow.cu", Saxpy("cli", 3000).source);
  std::string manifest =
      dir.Write("manifest.yaml", "version: 1\nkernels:\n  - name: slow\n    source: slow.cu\n");
  std::string server = " --server " + daemon_.address();
  ::kcache::testing::RunResult warm = ::kcache::testing::Run(
      ::kcache::testing::KcacheCli() + " warm --arch 7.5" + server + " " + manifest);
  ASSERT_EQ(warm.exit_code, 0) << warm.output << daemon_.Log();
  auto start = Clock::now();
  ::kcache::testing::RunResult get = ::kcache::testing::Run(
      ::kcache::testing::KcacheCli() +
      " get --json --progress --timeout 1 --device 8.9 --kernel slow" + server);
  double seconds = SecondsSince(start);
  ASSERT_EQ(get.exit_code, 0) << get.output << daemon_.Log();
  EXPECT_NE(get.output.find("\"daemon:compile\""), std::string::npos) << get.output;
  EXPECT_NE(get.output.find("kcached: slow for 8.9: compiling ("), std::string::npos) << get.output;
  EXPECT_NE(get.output.find(" of about "), std::string::npos) << get.output;
  std::printf("kcache get --timeout 1, a 3000 ms compile: served in %.2f s\n%s", seconds,
              get.output.substr(0, get.output.find('{')).c_str());
  ::kcache::testing::RunResult quiet = ::kcache::testing::Run(
      ::kcache::testing::KcacheCli() + " get --json --device 8.6 --kernel slow" + server);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("kcached: "), std::string::npos) << quiet.output;
}

// The daemon accepted the call and sent progress, then stopped (SIGSTOP) in the middle of
// the compile: after the 2 s deadline of silence the client compiles the kernel itself.
TEST_F(ClientProgressTest, ADaemonThatFallsSilentIsGivenUpOnAndTheKernelCompiledHere) {
  StartDaemon();
  std::unique_ptr<Client> client = DefaultClient(daemon_.address());
  ASSERT_TRUE(client->Resolve(Saxpy("contact"), kSm89).ok());  // the daemon is known
  absl::StatusOr<FetchedKernel> k = absl::UnknownError("not run");
  Clock::time_point stopped;
  std::thread caller([&] { k = client->Resolve(Saxpy("stopped", kSlowMillis), kSm89); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past a progress message
  EXPECT_TRUE(daemon_.Pause()) << "kcached did not stop on SIGSTOP";
  stopped = Clock::now();
  caller.join();
  double waited = SecondsSince(stopped);
  daemon_.Kill(SIGCONT);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->served_from, ServedFrom::kLocalCompile) << k->reason;
  EXPECT_NE(k->reason.find("nothing came for 2s"), std::string::npos) << k->reason;
  std::printf("a daemon stopped mid-compile: given up, compiled here %.2f s after the stop\n",
              waited);
}

// A request without want_progress (an older client) gets no progress message, and its answer
// as before; one with it hears at once and then every 0.5 s, with the compile limit.
TEST_F(ClientProgressTest, ProgressGoesOnlyToRequestsThatAskForIt) {
  StartDaemon();
  auto stub = ::kcache::testing::NewStub(daemon_.address());
  auto request = [](const std::string& tag) {
    KernelSource slow = Saxpy(tag, 1500);
    return ::kcache::testing::ResolveSpec(::kcache::testing::WireSpec(slow.name, slow.source), 8,
                                          9);
  };
  ::kcache::testing::ResolveOutcome old_style =
      ::kcache::testing::CallResolve(*stub, request("old"));
  ASSERT_TRUE(old_style.status.ok()) << old_style.status.error_message();
  EXPECT_TRUE(old_style.header_first);
  EXPECT_EQ(old_style.progress, 0);
  EXPECT_EQ(old_style.bytes.size(), old_style.header.size());

  v1::ResolveRequest asking = request("new");
  asking.set_want_progress(true);
  ::kcache::testing::ResolveOutcome new_style = ::kcache::testing::CallResolve(*stub, asking);
  ASSERT_TRUE(new_style.status.ok()) << new_style.status.error_message();
  EXPECT_TRUE(new_style.header_first);
  EXPECT_GE(new_style.progress, 2) << "one at once, and more while 1.5 s pass";
  EXPECT_EQ(new_style.last_progress.compile_limit_seconds(), 60u);
  EXPECT_EQ(new_style.bytes.size(), new_style.header.size());

  // A stored kernel is answered without any.
  ::kcache::testing::ResolveOutcome stored = ::kcache::testing::CallResolve(*stub, asking);
  ASSERT_TRUE(stored.status.ok());
  EXPECT_EQ(stored.progress, 0);
}

// The worker asks one second before kcached listens (a sidecar still starting): it waits,
// within the start-up grace, and kcached serves it.
TEST_F(ClientProgressTest, AWorkerStartedBeforeKcachedIsServedByIt) {
  std::unique_ptr<Client> client = DefaultClient(daemon_.address());
  absl::StatusOr<FetchedKernel> k = absl::UnknownError("not run");
  auto start = Clock::now();
  std::thread worker([&] { k = client->Resolve(Saxpy("early"), kSm89); });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  StartDaemon();
  worker.join();
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->from_daemon()) << client::ServedFromName(k->served_from) << ": " << k->reason;
  std::printf("a worker that asked 1 s before kcached started: served (%s) in %.2f s\n",
              std::string(client::ServedFromName(k->served_from)).c_str(), SecondsSince(start));
}

}  // namespace
}  // namespace kcache
