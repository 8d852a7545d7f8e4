// The compile workers' sandbox (engine/workers/sandbox.h, docs/compile-workers.md "Sandbox"),
// through a real pool of real workers compiling with NVRTC: a source that tries to read the
// host gets "cannot open source file" and none of the file, whatever path it takes; a
// compromised compiler (the fault-injecting worker) can open no file outside the toolkit,
// create none, open no socket, run no program and has an empty environment; and what
// compiled before still compiles. Skipped (not passed) on a kernel without Landlock and
// seccomp, where kcached refuses client sources instead (tested in hostile_includes_test).
#include "engine/workers/sandbox.h"

#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/manifest.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/workers/process_pool.h"
#include "gtest/gtest.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/toolkit.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

std::string Worker() { return testing::BinaryPath("engine/workers/kcache-compile-worker"); }
std::string FaultyWorker() {
  return testing::BinaryPath("engine/workers/kcache-compile-worker-faulty");
}
constexpr char kSecret[] = "kcache-sandbox-test-secret-7f3a9c";

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SandboxSupport support = DetectSandboxSupport();
    if (!support.Enough()) GTEST_SKIP() << "no sandbox on this kernel: " << support.Describe();
    const absl::StatusOr<std::shared_ptr<const Toolkit>>& toolkit = testing::SharedToolkit();
    if (!toolkit.ok()) GTEST_SKIP() << toolkit.status();
    toolkit_ = *toolkit;
    // A secret outside the toolkit, and one in the daemon's environment.
    secret_file_ = dir_.Write("secret.txt", absl::StrCat(kSecret, "\n"));
    setenv("KCACHE_TEST_SECRET", kSecret, 1);
  }

  std::unique_ptr<ProcessPoolCompiler> Pool(const std::string& worker) {
    ProcessPoolOptions options;
    options.worker_binary = worker;
    options.workers = 1;
    options.wall_time_per_compile = absl::Seconds(20);  // a blocked read would end here
    absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> pool =
        NewProcessPoolCompiler(toolkit_, options);
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }

  static CompileJob Job(const std::string& source, std::vector<std::string> options = {}) {
    CompileJob job;
    job.spec.name = "probe";
    job.spec.source = source;
    job.spec.options = std::move(options);
    job.id = ComputeKernelId(job.spec);
    job.target = *ParseTarget("sm_89");
    return job;
  }

  std::shared_ptr<const Toolkit> toolkit_;
  testing::TempDir dir_;
  std::string secret_file_;
};

TEST_F(SandboxTest, WorkersReportLandlockAndSeccompInForce) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Worker());
  ASSERT_NE(pool, nullptr);
  EXPECT_TRUE(pool->sandboxed()) << pool->sandbox();
  EXPECT_NE(pool->sandbox().find("Landlock ABI"), std::string::npos) << pool->sandbox();
  EXPECT_NE(pool->sandbox().find("seccomp"), std::string::npos) << pool->sandbox();
  EXPECT_NE(pool->sandbox().find("empty environment"), std::string::npos) << pool->sandbox();
}

// Every way found to make NVRTC read a host file: each fails to open, and no byte of the file
// (or of the daemon's environment) is in the message or the compile log.
TEST_F(SandboxTest, IncludesOfHostFilesCannotBeOpened) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Worker());
  ASSERT_NE(pool, nullptr);
  std::string relative = "../../../../../../../../.." + secret_file_;
  struct Variant {
    std::string what;
    std::string source;
    std::vector<std::string> options;
  };
  std::vector<Variant> variants = {
      {"absolute path", absl::StrCat("#include \"", secret_file_, "\"\n"), {}},
      {"angle brackets", absl::StrCat("#include <", secret_file_, ">\n"), {}},
      {"/etc/shadow", "#include \"/etc/shadow\"\n", {}},
      {"/etc/hostname", "#include \"/etc/hostname\"\n", {}},
      {"the daemon's environment", "#include \"/proc/self/environ\"\n", {}},
      {"the parent's environment", "#include \"/proc/1/environ\"\n", {}},
      {"relative path", absl::StrCat("#include \"", relative, "\"\n"), {}},
      {"macro-built path",
       absl::StrCat("#define STR(x) #x\n#define PATH(x) STR(x)\n#include PATH(", secret_file_,
                    ")\n"),
       {}},
      {"path from -D", "#include SECRET\n", {absl::StrCat("-DSECRET=\"", secret_file_, "\"")}},
      {"__has_include probe",
       absl::StrCat("#if __has_include(\"", secret_file_,
                    "\")\n#error readable\n#endif\n#include \"", secret_file_, "\"\n"),
       {}},
      {"a blocking read (/proc/kmsg)", "#include \"/proc/kmsg\"\n", {}},
      {"a fifo-like device (/dev/stdin)", "#include \"/dev/stdin\"\n", {}},
  };
  for (const Variant& v : variants) {
    absl::StatusOr<CompileOutput> out = pool->Compile(Job(v.source, v.options));
    ASSERT_FALSE(out.ok()) << v.what << " compiled";
    // Aborted, a compile error: not the wall-clock limit (a read that blocked).
    EXPECT_EQ(out.status().code(), absl::StatusCode::kAborted) << v.what << ": " << out.status();
    std::string log = CompileLogOf(out.status());
    EXPECT_NE(log.find("cannot open source file"), std::string::npos) << v.what << ": " << log;
    EXPECT_EQ(std::string(out.status().message()).find(kSecret), std::string::npos) << v.what;
    EXPECT_EQ(log.find(kSecret), std::string::npos) << v.what;
  }
  // The toolkit's own headers are still there.
  absl::StatusOr<CompileOutput> fp16 = pool->Compile(
      Job("#include <cuda_fp16.h>\n"
          "extern \"C\" __global__ void h(__half* x) { x[0] = __float2half(1.0f); }\n"));
  EXPECT_TRUE(fp16.ok()) << fp16.status();
}

// The fault-injecting worker runs the attempts itself, as a compromised NVRTC would.
TEST_F(SandboxTest, ACompromisedCompilerCanReachNothing) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(FaultyWorker());
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<CompileOutput> out =
      pool->Compile(Job(absl::StrCat("// KCACHE_TEST_ESCAPE:", secret_file_, "\n")));
  ASSERT_FALSE(out.ok());
  std::string report(out.status().message());
  for (const char* attempt : {"read=refused", "create=refused", "socket_inet=refused",
                              "socket_unix=refused", "exec=refused", "unshare=refused"}) {
    EXPECT_NE(report.find(attempt), std::string::npos) << attempt << " in " << report;
  }
  EXPECT_EQ(report.find("ALLOWED"), std::string::npos) << report;
  EXPECT_NE(report.find("environment=0"), std::string::npos) << report;
}

// What compiled before the sandbox still compiles in it: kernels with the toolkit's headers,
// their own headers from the spec, name expressions, LTO-IR.
TEST_F(SandboxTest, KernelsWithHeadersFromTheSpecAndTheToolkitStillCompile) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Worker());
  ASSERT_NE(pool, nullptr);
  CompileJob scale = Job(testing::kScaleTemplateSource);
  scale.spec.headers = {{"scale.cuh", testing::kScaleHeader}};
  scale.spec.name_expressions = {"scale<float>"};
  scale.id = ComputeKernelId(scale.spec);
  scale.want_ltoir = true;
  absl::StatusOr<CompileOutput> out = pool->Compile(scale);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->artifacts.size(), 3u);  // cubin, PTX, LTO-IR
  CompileJob cub = Job(R"(
#include <cub/block/block_reduce.cuh>
#include <cuda_bf16.h>
extern "C" __global__ void sum(const float* in, float* out) {
  using Reduce = cub::BlockReduce<float, 128>;
  __shared__ typename Reduce::TempStorage storage;
  float total = Reduce(storage).Sum(in[threadIdx.x]);
  if (threadIdx.x == 0) out[0] = __bfloat162float(__float2bfloat16(total));
}
)");
  absl::StatusOr<CompileOutput> reduced = pool->Compile(cub);
  EXPECT_TRUE(reduced.ok()) << reduced.status();
}

// The bundled kernel set compiles in the sandbox (12 kernels, CUB and cuda::std included), and
// so do kernels in the style of NVRTC's own samples that use the toolkit's other headers.
TEST_F(SandboxTest, TheBundledSetAndToolkitHeaderSamplesCompile) {
  ProcessPoolOptions options;
  options.worker_binary = Worker();
  options.workers = 2;
  absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> pool =
      NewProcessPoolCompiler(toolkit_, options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  absl::StatusOr<Manifest> bundled = LoadManifest(testing::SourcePath("kernels/manifest.yaml"));
  ASSERT_TRUE(bundled.ok()) << bundled.status();
  std::vector<CompileJob> jobs;
  for (const ManifestKernel& k : bundled->kernels) {
    jobs.push_back(CompileJob{k.record.spec, k.record.id, *ParseTarget("sm_90"), false, {}, {}});
  }
  for (const char* sample : {
           R"(#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void block_sum(const float* in, float* out) {
  cg::thread_block block = cg::this_thread_block();
  __shared__ float partial[256];
  partial[block.thread_rank()] = in[block.group_index().x * 256 + block.thread_rank()];
  block.sync();
  for (unsigned s = 128; s > 0; s /= 2) {
    if (block.thread_rank() < s) partial[block.thread_rank()] += partial[block.thread_rank() + s];
    block.sync();
  }
  if (block.thread_rank() == 0) out[block.group_index().x] = partial[0];
})",
           R"(#include <cuda/std/complex>
#include <cuda_fp16.h>
extern "C" __global__ void rotate(cuda::std::complex<float>* z, __half angle, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = __half2float(angle);
  if (i < n) z[i] *= cuda::std::complex<float>(cosf(a), sinf(a));
})",
       }) {
    jobs.push_back(Job(sample));
  }
  std::vector<absl::StatusOr<CompileOutput>> outputs(jobs.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i) {
    threads.emplace_back([&, i] { outputs[i] = (*pool)->Compile(jobs[i]); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(outputs[i].ok()) << jobs[i].spec.name << ": " << outputs[i].status();
  }
}

TEST(SandboxSupportTest, DescribesWhatTheKernelOffers) {
  SandboxSupport support = DetectSandboxSupport();
  std::string text = support.Describe();
  EXPECT_NE(text.find(support.landlock_abi > 0 ? "Landlock ABI" : "no Landlock"), std::string::npos)
      << text;
  EXPECT_NE(text.find("seccomp"), std::string::npos) << text;
}

}  // namespace
}  // namespace kcache
