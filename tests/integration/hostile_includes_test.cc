// Hostile sources sent to a real kcached: compiles cannot read the host (docs/compile-workers.md,
// "Sandbox"). Every way
// found to make NVRTC read a file of the daemon's machine, sent by Resolve and by Warm: the
// compile fails with "cannot open source file", and no response, no line of the daemon's log
// and nothing stored holds a byte of the secret; a blocking include fails at once, not at the
// wall-clock limit. Where the workers cannot be sandboxed (a worker that pretends so, built
// for tests), kcached compiles only the baked store's kernels unless told otherwise.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/store/store.h"
#include "engine/workers/sandbox.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

using ::kcache::testing::CallResolve;
using ::kcache::testing::CallWarm;
using ::kcache::testing::Contains;
using ::kcache::testing::DaemonOptions;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::ResolveOutcome;
using ::kcache::testing::ResolveSpec;
using ::kcache::testing::StatCounter;
using ::kcache::testing::WarmOutcome;
using ::kcache::testing::WireSpec;

constexpr char kSecret[] = "kcache-hostile-include-secret-41d8";

struct Variant {
  std::string what;
  std::string source;
  std::vector<std::string> options;
};

std::vector<Variant> HostileVariants(const std::string& secret_file) {
  std::string relative = "../../../../../../../../.." + secret_file;
  return {
      {"absolute", absl::StrCat("#include \"", secret_file, "\"\n"), {}},
      {"shadow", "#include \"/etc/shadow\"\n", {}},
      {"environ", "#include \"/proc/self/environ\"\n", {}},
      {"hostname", "#include \"../../../../etc/hostname\"\n", {}},
      {"relative", absl::StrCat("#include \"", relative, "\"\n"), {}},
      {"macro",
       absl::StrCat("#define S(x) #x\n#define P(x) S(x)\n#include P(", secret_file, ")\n"),
       {}},
      {"define", "#include SECRET\n", {absl::StrCat("-DSECRET=\"", secret_file, "\"")}},
      {"kmsg", "#include \"/proc/kmsg\"\n", {}},
  };
}

class HostileIncludesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_file_ = dir_.Write("secret.txt", absl::StrCat(kSecret, "\n"));
    setenv("KCACHE_TEST_SECRET", kSecret, 1);  // in kcached's environment (it inherits ours)
  }
  void TearDown() override { unsetenv("KCACHE_TEST_SECRET"); }

  void StartDaemon(std::vector<std::string> flags) {
    flags.push_back("--compile-timeout-seconds=60");
    daemon_ = std::make_unique<DaemonProcess>(DaemonOptions{
        .store = store_, .baked = baked_, .socket = "", .extra_flags = std::move(flags)});
    ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
    stub_ = ::kcache::testing::NewStub(daemon_->address());
  }

  // Everything the store holds, as bytes (keys, values, logs, listings).
  std::string StoreBytes() {
    std::string all;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(store_)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      all.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return all;
  }

  ::kcache::testing::TempDir dir_;
  std::string secret_file_;
  std::string store_ = (dir_ / "store");
  std::vector<std::string> baked_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::KernelCache::Stub> stub_;
};

TEST_F(HostileIncludesTest, NoResolveOrWarmReadsAHostFile) {
  SandboxSupport support = DetectSandboxSupport();
  if (!support.Enough()) GTEST_SKIP() << support.Describe();
  StartDaemon({});
  EXPECT_TRUE(Contains(daemon_->Log(), "compile workers are sandboxed")) << daemon_->Log();
  std::vector<Variant> variants = HostileVariants(secret_file_);
  std::string leaked;
  for (const Variant& v : variants) {
    ResolveOutcome out = CallResolve(
        *stub_, ResolveSpec(WireSpec(absl::StrCat("hostile_", v.what), v.source, v.options), 8, 9));
    // ABORTED: a compile error, at once; a read that blocked would end DEADLINE_EXCEEDED or
    // RESOURCE_EXHAUSTED at the 60 s limit.
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::ABORTED)
        << v.what << ": " << out.status.error_message();
    EXPECT_TRUE(Contains(out.status.error_message(), "cannot open source file"))
        << v.what << ": " << out.status.error_message();
    // Refused by the sandbox or missing: the same words (no "Permission denied" that would
    // tell the source the path exists).
    EXPECT_FALSE(Contains(out.status.error_message(), "Permission denied"))
        << v.what << ": " << out.status.error_message();
    leaked += out.status.error_message() + out.status.error_details() + out.bytes;
  }
  // The same sources through Warm: every job fails, and its message carries no secret.
  v1::WarmRequest warm;
  for (const Variant& v : variants) {
    *warm.add_kernels() = WireSpec(absl::StrCat("warm_", v.what), v.source, v.options);
  }
  warm.add_targets("8.9");
  WarmOutcome warmed = CallWarm(*stub_, warm);
  EXPECT_TRUE(warmed.status.ok()) << warmed.status.error_message();
  EXPECT_EQ(warmed.failed(), static_cast<int>(variants.size()));
  for (const v1::WarmJobDone& job : warmed.jobs) leaked += job.message();
  EXPECT_EQ(StatCounter(*stub_, "miss.compile_error"), variants.size());

  EXPECT_EQ(leaked.find(kSecret), std::string::npos) << "a response carried the secret";
  EXPECT_EQ(daemon_->Log().find(kSecret), std::string::npos) << "the log carried the secret";
  daemon_->Stop();
  EXPECT_EQ(StoreBytes().find(kSecret), std::string::npos) << "the store holds the secret";
}

TEST_F(HostileIncludesTest, UnsandboxedWorkersCompileOnlyTheImagesKernels) {
  // The image's own kernel, baked for 8.6 only: its 9.0 compile must still run.
  std::string manifest = dir_.Write("manifest.yaml", ::kcache::testing::kTestManifest);
  ::kcache::testing::WriteTestKernelFiles(dir_);
  std::string baked = dir_ / "baked";
  ::kcache::testing::RunResult warmed = ::kcache::testing::Run(
      absl::StrCat(::kcache::testing::KcacheCli(), " warm ", manifest, " --arch 8.6 --store ",
                   baked, " --allow-unsandboxed-compiles 2>&1"));
  ASSERT_EQ(warmed.exit_code, 0) << warmed.output;
  baked_ = {baked};
  // A worker that says it has no sandbox (the fault-injecting build, run under that name).
  std::string worker = dir_ / "kcache-compile-worker-unsandboxed";
  std::filesystem::copy_file(testing::BinaryPath("engine/workers/kcache-compile-worker-faulty"),
                             worker);
  StartDaemon({"--compile-worker", worker});
  EXPECT_TRUE(Contains(daemon_->Log(), "NOT sandboxed")) << daemon_->Log();
  EXPECT_TRUE(Contains(daemon_->Log(), "--allow-unsandboxed-compiles")) << daemon_->Log();

  // A kernel of the client's own (not the baked saxpy: that source is the image's).
  const std::string mine = absl::StrCat(::kcache::testing::kSaxpySource, "// the client's\n");
  ResolveOutcome sent = CallResolve(*stub_, ResolveSpec(WireSpec("mine", mine), 8, 9));
  EXPECT_EQ(sent.status.error_code(), grpc::StatusCode::NOT_FOUND) << sent.status.error_message();
  EXPECT_TRUE(Contains(sent.status.error_message(), "cannot be sandboxed"))
      << sent.status.error_message();
  EXPECT_EQ(StatCounter(*stub_, "miss.compile_not_allowed"), 1u);

  v1::ResolveRequest by_name = ResolveSpec(v1::KernelSpec(), 9, 0);  // no 8.6 SASS runs there
  by_name.clear_spec();
  by_name.set_kernel_name("saxpy");
  ResolveOutcome image = CallResolve(*stub_, by_name);
  EXPECT_TRUE(image.status.ok()) << image.status.error_message();
  EXPECT_EQ(image.header.tier(), v1::TIER_COMPILE);

  v1::WarmRequest warm;
  *warm.add_kernels() = WireSpec("mine", mine);
  warm.add_targets("8.9");
  grpc::Status refused = CallWarm(*stub_, warm).status;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Contains(refused.error_message(), "cannot be sandboxed")) << refused.error_message();

  // Told to accept the risk, it compiles what clients send.
  daemon_->Stop();
  StartDaemon({"--compile-worker", worker, "--allow-unsandboxed-compiles"});
  ResolveOutcome allowed = CallResolve(*stub_, ResolveSpec(WireSpec("mine", mine), 8, 9));
  EXPECT_TRUE(allowed.status.ok()) << allowed.status.error_message();
}

}  // namespace
}  // namespace kcache
