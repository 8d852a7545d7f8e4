// kcache-example-worker as a user runs it: against a real kcached with --device 8.9, with
// --no-cache (NVRTC in-process), and with no GPU and no --device (exit 2).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "kcache/device.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;

using ::kcache::testing::RunResult;
using nlohmann::json;

std::string WorkerBinary() {
  const char* path = std::getenv("KCACHE_EXAMPLE_WORKER");
  return path != nullptr && *path != '\0'
             ? path
             : testing::BinaryPath("examples/worker/kcache-example-worker");
}

class ExampleWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::kcache::testing::WriteTestKernelFiles(dir_);
    manifest_ = dir_.Write("manifest.yaml", std::string(::kcache::testing::kTestManifest) + R"(
  - name: hopper_only
    source: saxpy.cu
    options: [-DHOPPER=1]
    min_arch: 9.0
)");
  }
  RunResult Worker(const std::string& args) {
    return ::kcache::testing::Run(WorkerBinary() + " --manifest " + manifest_ + " " + args);
  }
  // kernel name -> its report
  static std::map<std::string, json> ByName(const json& report) {
    std::map<std::string, json> out;
    for (const json& k : report["kernels"]) out[k["name"].get<std::string>()] = k;
    return out;
  }

  ::kcache::testing::TempDir dir_;
  std::string manifest_;
};

TEST_F(ExampleWorkerTest, ResolvesEveryKernelThroughTheDaemonForDevice89) {
  ::kcache::testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  // First start: the daemon compiles the misses; second start: every kernel is a hit.
  RunResult first = Worker("--server " + daemon.address() + " --device 8.9 --deadline-ms 30000");
  ASSERT_EQ(first.exit_code, 0) << first.output << daemon.Log();
  EXPECT_TRUE(Contains(first.output, "daemon:compile")) << first.output;
  RunResult second = Worker("--server " + daemon.address() + " --device 8.9 --json");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  json report = json::parse(second.output);
  EXPECT_EQ(report["device"], "8.9");
  EXPECT_TRUE(report["gpu"].is_null());
  std::map<std::string, json> kernels = ByName(report);
  ASSERT_EQ(kernels.size(), 3u);
  for (const char* name : {"saxpy", "scale"}) {
    EXPECT_EQ(kernels[name]["outcome"], "served") << kernels[name].dump();
    EXPECT_EQ(kernels[name]["served_from"], "daemon:memory") << kernels[name].dump();
    EXPECT_EQ(kernels[name]["rule"], "exact_sass");
    EXPECT_EQ(kernels[name]["target"], "sm_89");
  }
  EXPECT_EQ(kernels["hopper_only"]["outcome"], "skipped");
  EXPECT_TRUE(Contains(kernels["hopper_only"]["reason"].get<std::string>(), "excludes 8.9"));
  std::printf("worker start through kcached (warm): %.1f ms\n",
              report["total_micros"].get<double>() / 1e3);
}

// --device repeated pretends a node: each GPU is reported with its own SM's artifacts, and the
// daemon is asked once per distinct SM.
TEST_F(ExampleWorkerTest, APretendNodeGetsEachGpuItsOwnSmsKernels) {
  ::kcache::testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  RunResult run = Worker("--server " + daemon.address() +
                         " --device 8.6 --device 9.0 --device 8.6 --deadline-ms 60000 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output << daemon.Log();
  json report = json::parse(run.output);
  EXPECT_EQ(report["distinct_devices"], 2);
  ASSERT_EQ(report["gpus"].size(), 3u);
  const char* sms[] = {"8.6", "9.0", "8.6"};
  for (size_t g = 0; g < 3; ++g) {
    const json& gpu = report["gpus"][g];
    EXPECT_EQ(gpu["ordinal"], g);
    EXPECT_EQ(gpu["device"], sms[g]);
    std::map<std::string, json> kernels = ByName(gpu);
    std::string sass = std::string("sm_") + sms[g][0] + sms[g][2];
    EXPECT_EQ(kernels["saxpy"]["target"], sass) << gpu.dump();
    EXPECT_EQ(kernels["scale"]["target"], sass) << gpu.dump();
    EXPECT_EQ(kernels["hopper_only"]["outcome"], g == 1 ? "served" : "skipped") << gpu.dump();
  }
  EXPECT_EQ(report["device"], "8.6");  // GPU 0 at the top level, as a one-GPU worker reports
  RunResult text = Worker("--server " + daemon.address() + " --device 8.6 --device 9.0");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_TRUE(Contains(text.output, "node of 2 GPUs, 2 distinct SMs")) << text.output;
  EXPECT_TRUE(Contains(text.output, "GPU 1: device 9.0")) << text.output;
  EXPECT_TRUE(Contains(text.output, "total 3 kernels x 2 GPUs")) << text.output;
}

TEST_F(ExampleWorkerTest, NoCacheCompilesEveryKernelInProcess) {
  RunResult run = Worker("--no-cache --device 8.9 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json report = json::parse(run.output);
  std::map<std::string, json> kernels = ByName(report);
  for (const char* name : {"saxpy", "scale"}) {
    EXPECT_EQ(kernels[name]["served_from"], "local_compile") << kernels[name].dump();
    EXPECT_EQ(kernels[name]["rule"], "compiled");
    EXPECT_EQ(kernels[name]["kind"], "cubin");
  }
  EXPECT_EQ(kernels["hopper_only"]["outcome"], "skipped");
  std::printf("worker start compiling in-process: %.1f ms\n",
              report["total_micros"].get<double>() / 1e3);
}

TEST_F(ExampleWorkerTest, NoGpuAndNoDeviceExitsTwoSayingSo) {
  if (client::DetectDevices().ok()) GTEST_SKIP() << "this machine has a GPU";
  RunResult run = Worker("--no-cache");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(Contains(run.output, "no GPU")) << run.output;
  EXPECT_TRUE(Contains(run.output, "--device")) << run.output;
}

TEST_F(ExampleWorkerTest, StubDriverLibraryCountsAsNoDriver) {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no stub libcuda at " << stub;
  RunResult run = ::kcache::testing::Run("KCACHE_LIBCUDA=" + stub + " " + WorkerBinary() +
                                         " --manifest " + manifest_ + " --no-cache");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(Contains(run.output, "stub")) << run.output;
}

TEST_F(ExampleWorkerTest, UnreachableDaemonFallsBackToLocalCompiles) {
  RunResult run = Worker("--server unix://" + (dir_ / "absent.sock") + " --device 8.6 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::map<std::string, json> kernels = ByName(json::parse(run.output));
  EXPECT_EQ(kernels["saxpy"]["served_from"], "local_compile") << kernels["saxpy"].dump();
  EXPECT_EQ(kernels["scale"]["served_from"], "local_compile");
}

}  // namespace
}  // namespace kcache
