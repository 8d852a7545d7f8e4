// Mixed-GPU nodes on real GPUs (docs/gpu-tests.md): a cubin for another SM is refused at
// LoadedModule::Load with a message naming the kernel, its target and the GPU, before the driver
// sees it; a cubin for the GPU loads with every entry point looked up; and, on a machine with two
// or more GPUs, every GPU runs the bundled kernels resolved for its own SM (one resolve per
// distinct SM, ResolveForGpus + LoadForNode) and matches the CPU references. Exits 125 without a
// GPU; the multi-GPU test skips with one GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kcache/device.h"
#include "kcache/kcache.h"
#include "kcache/node.h"
#include "kernels/reference/launch.h"
#include "tests/gpu/compare_outputs.h"
#include "tests/gpu/cuda_launch_api.h"
#include "tests/gpu/gpu_launcher.h"
#include "tests/gpu/launch_plan.h"
#include "tests/gpu/reference_runner.h"
#include "tests/gpu/served_kernels.h"
#include "tests/testutil/kernels.h"

namespace kcache::gpu_test {
namespace {

const LaunchDriver* g_cu = nullptr;  // set by main once a GPU was found

std::vector<client::GpuInfo> Gpus() {
  absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
  EXPECT_TRUE(gpus.ok()) << gpus.status();
  return gpus.ok() ? *gpus : std::vector<client::GpuInfo>{};
}

// A device whose SASS no GPU of `gpu`'s SM runs: another major.
client::Device OtherSm(const client::Device& gpu) {
  return client::Device{gpu.sm_major == 7 ? 8 : 7, gpu.sm_major == 7 ? 6 : 5, gpu.driver_version};
}

client::KernelSource Saxpy() {
  client::KernelSource saxpy;
  saxpy.name = "saxpy";
  saxpy.source = ::kcache::testing::kSaxpySource;
  return saxpy;
}

TEST(LoadCheckOnGpu, ACubinForAnotherSmIsRefusedAtLoadNamingKernelTargetAndGpu) {
  std::vector<client::GpuInfo> gpus = Gpus();
  ASSERT_FALSE(gpus.empty());
  const client::GpuInfo& gpu = gpus.front();
  client::LocalCompiler compiler;
  client::Device other = OtherSm(gpu.device);
  absl::StatusOr<client::FetchedKernel> wrong = compiler.Compile(Saxpy(), other);
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  ASSERT_EQ(wrong->kind, client::ArtifactKind::kCubin);
  absl::StatusOr<std::unique_ptr<client::LoadedModule>> refused =
      client::LoadedModule::Load(*wrong, gpu.ordinal);
  ASSERT_FALSE(refused.ok()) << "an sm_" << other.arch() << " cubin loaded on " << gpu.name;
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(
      refused.status().message(),
      absl::StrCat("saxpy is sm_", other.arch(), " SASS; GPU ", gpu.ordinal, " is ", gpu.name,
                   " (sm_", gpu.device.arch(), "): resolve it for ", gpu.device.ToString())))
      << refused.status();
}

TEST(LoadCheckOnGpu, ACubinForTheGpuLoadsWithEveryEntryPointLookedUp) {
  std::vector<client::GpuInfo> gpus = Gpus();
  ASSERT_FALSE(gpus.empty());
  client::LocalCompiler compiler;
  absl::StatusOr<client::FetchedKernel> own = compiler.Compile(Saxpy(), gpus.front().device);
  ASSERT_TRUE(own.ok()) << own.status();
  absl::StatusOr<std::unique_ptr<client::LoadedModule>> module =
      client::LoadedModule::Load(*own, gpus.front().ordinal);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE((*module)->Function("saxpy").ok());
  EXPECT_EQ(client::LoadedModule::Load(*own, static_cast<int>(gpus.size())).status().code(),
            absl::StatusCode::kInvalidArgument);  // an ordinal the process does not see
}

// Runs every entry point of `node`'s kernels for GPU g on GPU g and compares with the CPU.
void RunOnGpu(const client::NodeKernels& node, const std::vector<client::GpuModules>& modules,
              const std::vector<client::KernelSource>& sources, size_t g) {
  const client::GpuInfo& gpu = node.gpus[g];
  SCOPED_TRACE(absl::StrCat("GPU ", gpu.ordinal, " ", gpu.name, " sm_", gpu.device.arch()));
  CuDevice device = 0;
  ASSERT_EQ(g_cu->cuDeviceGet(&device, gpu.ordinal), kCuSuccess);
  CuContext context = nullptr;
  ASSERT_EQ(g_cu->cuDevicePrimaryCtxRetain(&context, device), kCuSuccess);
  ASSERT_EQ(g_cu->cuCtxSetCurrent(context), kCuSuccess);
  int launched = 0;
  for (const launch::EntryPoint& entry : launch::kEntryPoints) {
    if (entry.min_sm > gpu.device.arch()) continue;
    size_t k = 0;
    while (k < sources.size() && sources[k].name != entry.kernel) ++k;
    if (k == sources.size() || !node.ForGpu(g)[k].ok()) continue;  // outside its arch range
    ASSERT_TRUE(modules[g][k].ok()) << entry.kernel << ": " << modules[g][k].status();
    const client::FetchedKernel& fetched = *node.ForGpu(g)[k];
    EXPECT_EQ(fetched.target, absl::StrCat("sm_", gpu.device.arch()));
    std::string symbol = entry.name_expression ? fetched.LoweredName(entry.symbol) : entry.symbol;
    absl::StatusOr<void*> function = (*modules[g][k])->Function(symbol);
    ASSERT_TRUE(function.ok()) << function.status();
    absl::StatusOr<Problem> input = MakeProblem(entry, {});
    ASSERT_TRUE(input.ok()) << input.status();
    Problem want = *input;
    ASSERT_TRUE(RunReference(want).ok());
    absl::StatusOr<Problem> got = LaunchOnGpu(*g_cu, *function, *input);
    ASSERT_TRUE(got.ok()) << got.status();
    for (const TensorComparison& c : CompareProblem(*input, want, *got)) {
      EXPECT_TRUE(c.ok()) << entry.kernel << " " << entry.symbol << ": " << c.Describe();
    }
    ++launched;
  }
  EXPECT_GT(launched, 0);
  g_cu->cuCtxSetCurrent(nullptr);
  g_cu->cuDevicePrimaryCtxRelease_v2(device);
}

TEST(NodeOnGpus, EveryGpuRunsTheKernelsOfItsOwnSmAgainstTheCpuReference) {
  std::vector<client::GpuInfo> gpus = Gpus();
  if (gpus.size() < 2) GTEST_SKIP() << "one GPU: the node test needs two or more";
  absl::StatusOr<std::vector<client::KernelSource>> sources =
      client::LoadManifestKernels(BundledManifestPath());
  ASSERT_TRUE(sources.ok()) << sources.status();
  // No daemon: the client compiles each distinct SM's kernels itself (its fail-open path).
  client::ClientOptions options;
  options.address = "unix:///nonexistent/kcache-node-gpu-test.sock";
  options.deadline = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<client::Client>> c = client::Client::Connect(options);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<client::KernelRef> refs(sources->begin(), sources->end());
  client::NodeKernels node = client::ResolveForGpus(**c, refs, gpus);
  std::vector<client::GpuModules> modules = client::LoadForNode(node);
  std::printf("[ NODE     ] %zu GPUs, %zu distinct SMs\n", gpus.size(), node.devices.size());
  for (size_t g = 0; g < gpus.size(); ++g) RunOnGpu(node, modules, *sources, g);
}

}  // namespace
}  // namespace kcache::gpu_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  static kcache::gpu_test::GpuProbe probe = kcache::gpu_test::ProbeGpuOrExit();
  kcache::gpu_test::g_cu = probe.driver.get();
  return RUN_ALL_TESTS();
}
