// Progress that says where a compile is (docs/protocol.md, "Progress"), against a real kcached
// with one compile worker whose compiles the fault-injecting worker makes slow
// (KCACHE_TEST_SLEEP_MS): a client's progress callback sees its kernel queued behind another
// compile, then compiling, before it is served; a compile of a kernel compiled before for
// another target says how long that took; the C ABI's progress callback sees the same.
// (`kcache get --progress`: client_progress_test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kcache/kcache.h"
#include "kcache/kcache_c.h"
#include "tests/testutil/client_kernels.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

using client::CallOptions;
using client::Client;
using client::ClientOptions;
using client::CompileProgress;
using client::Device;
using client::FetchedKernel;
using client::KernelSource;
using Stage = client::CompileProgress::Stage;
using ::kcache::testing::DaemonProcess;

constexpr Device kSm89{8, 9, 13000};
constexpr Device kSm86{8, 6, 13000};

// saxpy, made a kernel of its own by `tag`, whose compile in the test worker first sleeps
// `millis`.
KernelSource Slow(const std::string& tag, int millis) {
  KernelSource s = ::kcache::testing::SaxpySource();
  s.name = "saxpy_" + tag;
  s.source = absl::StrCat("// ", tag, " KCACHE_TEST_SLEEP_MS:", millis, "\n", s.source);
  return s;
}

// What a call's progress callback saw, in order. Thread-safe.
class Seen {
 public:
  CallOptions Options() {
    CallOptions call;
    call.on_progress = [this](const CompileProgress& p) {
      absl::MutexLock lock(&mu_);
      seen_.push_back(p);
    };
    return call;
  }
  std::vector<CompileProgress> all() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  // Waits (up to 30 s) for a progress in `stage`.
  bool Await(Stage stage) {
    for (int i = 0; i < 3000; ++i) {
      for (const CompileProgress& p : all()) {
        if (p.stage == stage) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  absl::Mutex mu_;
  std::vector<CompileProgress> seen_ ABSL_GUARDED_BY(mu_);
};

// The index of the first progress in `stage` (with queued_behind >= `behind` when queued)
// from `from` on; -1 when none.
int FirstIn(const std::vector<CompileProgress>& seen, Stage stage, size_t from = 0,
            uint32_t behind = 0) {
  for (size_t i = from; i < seen.size(); ++i) {
    if (seen[i].stage == stage && (stage != Stage::kQueued || seen[i].queued_behind >= behind)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::string Describe(const std::vector<CompileProgress>& seen) {
  std::string out;
  for (const CompileProgress& p : seen) {
    absl::StrAppend(&out, "[stage ", static_cast<int>(p.stage), " behind ", p.queued_behind,
                    " compiling ", absl::FormatDuration(p.compiling_for), " expected ",
                    absl::FormatDuration(p.expected), "] ");
  }
  return out;
}

class CompileProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.options().extra_flags = {
        "--compile-worker",
        testing::BinaryPath("engine/workers/kcache-compile-worker-faulty"),
        "--compile-workers",
        "1",
        "--compile-timeout-seconds",
        "60"};
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    if (daemon_.Log().find("serve-only") != std::string::npos) {
      GTEST_SKIP() << "no CUDA toolkit to compile with";
    }
  }
  std::unique_ptr<Client> NewClient(const std::string& name) {
    ClientOptions options;
    options.address = daemon_.address();
    options.client_name = name;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  DaemonProcess daemon_;
};

TEST_F(CompileProgressTest, AKernelQueuedBehindAnotherCompileIsSeenQueuedThenCompiling) {
  std::unique_ptr<Client> first = NewClient("first");
  std::unique_ptr<Client> second = NewClient("second");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  Seen holding;
  absl::StatusOr<FetchedKernel> held = absl::UnknownError("not run");
  std::thread hold([&] { held = first->Resolve(Slow("hold", 4000), kSm89, holding.Options()); });
  ASSERT_TRUE(holding.Await(Stage::kCompiling)) << Describe(holding.all()) << daemon_.Log();
  Seen waiting;
  absl::StatusOr<FetchedKernel> k = second->Resolve(Slow("queued", 1500), kSm89, waiting.Options());
  hold.join();
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(k.ok()) << k.status();
  std::vector<CompileProgress> seen = waiting.all();
  int queued = FirstIn(seen, Stage::kQueued, 0, /*behind=*/1);
  ASSERT_GE(queued, 0) << "never queued behind the held worker: " << Describe(seen);
  int compiling = FirstIn(seen, Stage::kCompiling, static_cast<size_t>(queued));
  EXPECT_GE(compiling, 0) << "never compiling after it was queued: " << Describe(seen);
  for (const CompileProgress& p : seen) EXPECT_EQ(p.index, 0u);
  std::printf("progress of a kernel queued behind a 4 s compile: %s\n", Describe(seen).c_str());
}

// The same kernel compiled for 8.9 first: its compile for 8.6 is expected to take about as
// long, and the progress says how long that was.
TEST_F(CompileProgressTest, ACompileOfAKernelCompiledBeforeForAnotherTargetSaysHowLongItTook) {
  std::unique_ptr<Client> c = NewClient("expecting");
  ASSERT_NE(c, nullptr);
  KernelSource kernel = Slow("again", 1500);
  Seen before;
  ASSERT_TRUE(c->Resolve(kernel, kSm89, before.Options()).ok());
  for (const CompileProgress& p : before.all()) {
    EXPECT_EQ(p.expected, absl::ZeroDuration()) << "nothing was recorded for it yet";
  }
  Seen again;
  ASSERT_TRUE(c->Resolve(kernel, kSm86, again.Options()).ok());
  std::vector<CompileProgress> seen = again.all();
  int compiling = FirstIn(seen, Stage::kCompiling);
  ASSERT_GE(compiling, 0) << Describe(seen);
  EXPECT_GT(seen[compiling].expected, absl::ZeroDuration()) << Describe(seen);
}

// What a C ABI progress callback saw: the stages, in order.
void RecordStage(void* context, const kcache_progress* progress) {
  static_cast<std::vector<int>*>(context)->push_back(progress->stage);
}

TEST_F(CompileProgressTest, TheCAbiProgressCallbackSeesItsKernelCompiling) {
  kcache_options options;
  kcache_options_init(&options);
  std::string address = daemon_.address();
  options.address = address.c_str();
  kcache_client* c = nullptr;
  ASSERT_EQ(kcache_connect(&options, &c), KCACHE_OK) << kcache_last_error();
  std::vector<int> stages;
  kcache_set_progress_callback(c, &RecordStage, &stages);
  KernelSource slow = Slow("c_abi", 1500);
  kcache_source source = {};
  source.name = slow.name.c_str();
  source.source = slow.source.c_str();
  kcache_device device = {8, 9, 13000};
  kcache_kernel* kernel = nullptr;
  EXPECT_EQ(kcache_resolve(c, &source, &device, &kernel), KCACHE_OK) << kcache_last_error();
  kcache_kernel_free(kernel);
  kcache_client_free(c);
  EXPECT_NE(std::find(stages.begin(), stages.end(), KCACHE_STAGE_COMPILING), stages.end())
      << stages.size() << " progress calls, none compiling";
}

}  // namespace
}  // namespace kcache
