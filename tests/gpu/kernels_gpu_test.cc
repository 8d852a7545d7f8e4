// The GPU suite (docs/gpu-tests.md): what a worker gets from kcached for the bundled kernels
// runs, and computes what the CPU references compute.
//
// main() first looks for a GPU through a dlopen'd driver; with no driver, the toolkit's stub
// driver, or no device it prints "no GPU: <reason>; skipping" and exits 125 (ctest: Skipped).
// With a GPU, a global environment starts a real kcached on a temp socket and store, warms the
// kernels the selected tests need for the device's own SM through libkcache's Client, fetches
// each (daemon compile off, no local fallback), and loads it with libkcache's LoadedModule.
// Then one test per launch-table entry point (kernels/reference/launch.h) fills its inputs,
// launches it, and compares every output with the CPU reference (kernels/reference/reference.h)
// under the table's tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/manifest.h"
#include "engine/compile/toolkit.h"
#include "kcache/device.h"
#include "kcache/kcache.h"
#include "kernels/reference/launch.h"
#include "tests/gpu/compare_outputs.h"
#include "tests/gpu/cuda_launch_api.h"
#include "tests/gpu/gpu_launcher.h"
#include "tests/gpu/launch_plan.h"
#include "tests/gpu/reference_runner.h"
#include "tests/gpu/served_kernels.h"

namespace kcache::gpu_test {
namespace {

constexpr char kServedSuite[] = "ServedModules";

struct LoadedKernel {
  const client::FetchedKernel* fetched = nullptr;
  std::unique_ptr<client::LoadedModule> module;
  absl::Status load_status;
};

// Everything the tests share; prepared once per process, after the GPU probe succeeded.
class GpuSuite : public ::testing::Environment {
 public:
  GpuSuite(GpuProbe probe, std::string toolkit_root)
      : probe_(std::move(probe)), toolkit_root_(std::move(toolkit_root)) {
    instance_ = this;
  }
  static GpuSuite& Get() { return *instance_; }

  void SetUp() override { status_ = Prepare(); }
  void TearDown() override {
    modules_.clear();
    served_.reset();
    if (context_ != nullptr) cu().cuDevicePrimaryCtxRelease_v2(probe_.device);
  }

  const absl::Status& status() const { return status_; }
  const LaunchDriver& cu() const { return *probe_.driver; }
  const GpuProbe& probe() const { return probe_; }
  const client::Device& device() const { return device_; }
  const std::vector<client::GpuInfo>& gpus() const { return gpus_; }
  const Manifest& manifest() const { return manifest_; }
  const ServedKernels* served() const { return served_.get(); }
  const LoadedKernel* Kernel(const std::string& name) const {
    auto it = modules_.find(name);
    return it == modules_.end() ? nullptr : &it->second;
  }

 private:
  // The manifest kernels the tests selected to run (after --gtest_filter) need, limited to
  // those whose arch range holds the device.
  std::vector<std::string> NeededKernels() const {
    std::set<std::string> eligible;
    for (const std::string& name : KernelsForArch(manifest_, device_.arch())) eligible.insert(name);
    std::set<std::string> needed;
    const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
    for (int s = 0; s < unit.total_test_suite_count(); ++s) {
      const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
      for (int t = 0; t < suite.total_test_count(); ++t) {
        const ::testing::TestInfo& info = *suite.GetTestInfo(t);
        if (!info.should_run()) continue;
        if (absl::string_view(info.test_suite_name()) == kServedSuite) {
          needed.insert(eligible.begin(), eligible.end());
          continue;
        }
        for (const launch::EntryPoint& entry : launch::kEntryPoints) {
          if (absl::EndsWith(info.name(), absl::StrCat("/", TestNameFor(entry))) &&
              eligible.count(entry.kernel) > 0) {
            needed.insert(entry.kernel);
          }
        }
      }
    }
    return {needed.begin(), needed.end()};
  }

  absl::Status Prepare() {
    absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
    if (!gpus.ok()) {
      return absl::Status(gpus.status().code(),
                          absl::StrCat("libkcache's DetectDevices: ", gpus.status().message()));
    }
    gpus_ = *gpus;
    device_ = gpus_.at(probe_.ordinal).device;
    if (CuResult r = cu().cuDevicePrimaryCtxRetain(&context_, probe_.device); r != kCuSuccess) {
      context_ = nullptr;
      return absl::InternalError(absl::StrCat("cuDevicePrimaryCtxRetain: ", cu().ErrorText(r)));
    }
    if (CuResult r = cu().cuCtxSetCurrent(context_); r != kCuSuccess) {
      return absl::InternalError(absl::StrCat("cuCtxSetCurrent: ", cu().ErrorText(r)));
    }
    absl::StatusOr<Manifest> manifest = LoadManifest(BundledManifestPath());
    if (!manifest.ok()) return manifest.status();
    manifest_ = *std::move(manifest);

    const std::vector<std::string> needed = NeededKernels();
    std::printf("[ GPU      ] %s (sm_%d, driver %d); warming %zu kernels for %s through kcached\n",
                probe_.name.c_str(), device_.arch(), probe_.driver_version, needed.size(),
                ExactTarget(device_).c_str());
    if (needed.empty()) return absl::OkStatus();
    ServedKernels::Options options;
    options.toolkit_root = toolkit_root_;
    absl::StatusOr<std::unique_ptr<ServedKernels>> served =
        ServedKernels::Start(manifest_, needed, device_, options);
    if (!served.ok()) return served.status();
    served_ = *std::move(served);
    std::printf("[ GPU      ] warm: %u built, %u cached in %.1f ms\n", served_->warm_totals().built,
                served_->warm_totals().cached, served_->warm_micros() / 1000.0);

    for (const auto& [name, fetched] : served_->kernels()) {
      LoadedKernel& loaded = modules_[name];
      loaded.fetched = &fetched;
      absl::StatusOr<std::unique_ptr<client::LoadedModule>> module =
          client::LoadedModule::Load(fetched, probe_.ordinal);
      if (module.ok()) {
        loaded.module = *std::move(module);
        std::printf("[ GPU      ] %-22s %-8s %8zu bytes, loaded in %6lld us\n", name.c_str(),
                    fetched.target.c_str(), fetched.data().size(),
                    static_cast<long long>(loaded.module->load_micros()));
      } else {
        loaded.load_status = module.status();
      }
    }
    return absl::OkStatus();
  }

  static GpuSuite* instance_;
  GpuProbe probe_;
  std::string toolkit_root_;
  absl::Status status_ = absl::UnknownError("the GPU environment was not set up");
  client::Device device_;
  std::vector<client::GpuInfo> gpus_;
  CuContext context_ = nullptr;
  Manifest manifest_;
  std::unique_ptr<ServedKernels> served_;
  std::map<std::string, LoadedKernel> modules_;
};
GpuSuite* GpuSuite::instance_ = nullptr;

// ---- served modules ------------------------------------------------------------------------

TEST(GpuDevice, DetectDevicesAgreesWithTheDriver) {
  const GpuSuite& suite = GpuSuite::Get();
  ASSERT_TRUE(suite.status().ok()) << suite.status();
  ASSERT_GT(suite.gpus().size(), static_cast<size_t>(suite.probe().ordinal));
  const client::GpuInfo& gpu = suite.gpus()[suite.probe().ordinal];
  EXPECT_EQ(gpu.device.sm_major, suite.probe().sm_major);
  EXPECT_EQ(gpu.device.sm_minor, suite.probe().sm_minor);
  EXPECT_EQ(gpu.device.driver_version, static_cast<uint32_t>(suite.probe().driver_version));
  EXPECT_EQ(gpu.name, suite.probe().name);
}

TEST(ServedModules, EveryKernelIsServedAsACubinForExactlyTheDeviceSmAndLoads) {
  const GpuSuite& suite = GpuSuite::Get();
  ASSERT_TRUE(suite.status().ok()) << suite.status();
  const std::vector<std::string> names = KernelsForArch(suite.manifest(), suite.device().arch());
  ASSERT_FALSE(names.empty()) << "no bundled kernel supports " << suite.device().ToString();
  ASSERT_NE(suite.served(), nullptr);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const LoadedKernel* kernel = suite.Kernel(name);
    ASSERT_NE(kernel, nullptr) << "kcached served nothing for " << name;
    EXPECT_TRUE(CheckExactCubin(*kernel->fetched, suite.device()).ok())
        << CheckExactCubin(*kernel->fetched, suite.device());
    EXPECT_TRUE(kernel->load_status.ok()) << kernel->load_status;
    if (kernel->module != nullptr) {
      ::testing::Test::RecordProperty(absl::StrCat("load_us.", name),
                                      static_cast<int>(kernel->module->load_micros()));
    }
  }
}

// ---- one test per entry point --------------------------------------------------------------

class KernelLaunchTest : public ::testing::TestWithParam<size_t> {
 protected:
  // Fills a problem, runs the reference on a copy and the kernel on the GPU, compares.
  void RunAndCompare(CuFunction function, const ProblemOptions& options) {
    const launch::EntryPoint& entry = launch::kEntryPoints[GetParam()];
    absl::StatusOr<Problem> input = MakeProblem(entry, options);
    ASSERT_TRUE(input.ok()) << input.status();
    Problem want = *input;
    const absl::Status reference = RunReference(want);
    ASSERT_TRUE(reference.ok()) << reference;
    LaunchTiming timing;
    absl::StatusOr<Problem> got = LaunchOnGpu(GpuSuite::Get().cu(), function, *input, &timing);
    ASSERT_TRUE(got.ok()) << got.status();
    RecordProperty(options.null_optional ? "launch_us_null_optional" : "launch_us",
                   static_cast<int>(timing.launch_micros));
    for (const TensorComparison& c : CompareProblem(*input, want, *got)) {
      EXPECT_TRUE(c.ok()) << entry.kernel << " " << entry.symbol << ": " << c.Describe();
      if (c.tolerated > 0) std::printf("[ NOTE     ] %s\n", c.Describe().c_str());
    }
  }
};

TEST_P(KernelLaunchTest, MatchesCpuReference) {
  const launch::EntryPoint& entry = launch::kEntryPoints[GetParam()];
  const GpuSuite& suite = GpuSuite::Get();
  ASSERT_TRUE(suite.status().ok()) << suite.status();
  if (entry.min_sm > suite.device().arch()) {
    GTEST_SKIP() << entry.symbol << " needs sm_" << entry.min_sm << "; the GPU is "
                 << ExactTarget(suite.device());
  }
  const LoadedKernel* kernel = suite.Kernel(entry.kernel);
  ASSERT_NE(kernel, nullptr) << "kcached served nothing for " << entry.kernel;
  ASSERT_TRUE(kernel->load_status.ok()) << kernel->load_status;
  EXPECT_TRUE(CheckExactCubin(*kernel->fetched, suite.device()).ok())
      << CheckExactCubin(*kernel->fetched, suite.device());
  const std::string symbol =
      entry.name_expression ? kernel->fetched->LoweredName(entry.symbol) : entry.symbol;
  ASSERT_FALSE(symbol.empty()) << entry.kernel << " was served without a lowered name for "
                               << entry.symbol;
  absl::StatusOr<void*> function = kernel->module->Function(symbol);
  ASSERT_TRUE(function.ok()) << function.status();
  RecordProperty("module_load_us", static_cast<int>(kernel->module->load_micros()));

  {
    SCOPED_TRACE("every argument present");
    RunAndCompare(*function, {});
  }
  const bool has_optional = std::any_of(entry.params, entry.params + entry.num_params,
                                        [](const launch::Param& p) { return p.nullable; });
  if (has_optional) {
    SCOPED_TRACE("optional pointers null");
    ProblemOptions options;
    options.null_optional = true;
    RunAndCompare(*function, options);
  }
}

std::vector<size_t> AllEntryPoints() {
  std::vector<size_t> all(launch::kNumEntryPoints);
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  return all;
}

INSTANTIATE_TEST_SUITE_P(BundledKernels, KernelLaunchTest, ::testing::ValuesIn(AllEntryPoints()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return TestNameFor(launch::kEntryPoints[info.param]);
                         });

// Exits 125 (after saying why) when this machine's GPU (`probe`, ProbeGpuOrExit's) cannot run
// the suite; returns otherwise.
void SkipUnlessRunnable(const GpuProbe& probe, std::string* toolkit_root) {
  auto skip = [&](const std::string& why) {
    std::printf("GPU %s (sm_%d) found, but %s; skipping\n", probe.name.c_str(), probe.arch(),
                why.c_str());
    std::exit(125);
  };
  *toolkit_root = Toolkit::DefaultRoot();
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(*toolkit_root);
  if (!toolkit.ok()) {
    skip(absl::StrCat("no CUDA toolkit to warm with: ", toolkit.status().message()));
  }
  const ToolkitIdentity& id = (*toolkit)->identity();
  const std::vector<int>& archs = (*toolkit)->supported_archs();
  if (std::find(archs.begin(), archs.end(), probe.arch()) == archs.end()) {
    skip(absl::StrCat(id.DisplayName(), " cannot build for sm_", probe.arch(), " (it supports ",
                      absl::StrJoin(archs, " "), ")"));
  }
  const int min_driver = id.major * 1000 + id.minor * 10;
  if (probe.driver_version < min_driver) {
    skip(absl::StrCat("its driver (", probe.driver_version, ") is older than the ", min_driver,
                      " that ", id.DisplayName(), " cubins need; install a newer driver"));
  }
}

}  // namespace
}  // namespace kcache::gpu_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing (gtest_discover_tests at build time) needs no GPU.
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  kcache::gpu_test::GpuProbe probe = kcache::gpu_test::ProbeGpuOrExit();
  std::string toolkit_root;
  kcache::gpu_test::SkipUnlessRunnable(probe, &toolkit_root);
  ::testing::AddGlobalTestEnvironment(
      new kcache::gpu_test::GpuSuite(std::move(probe), toolkit_root));
  return RUN_ALL_TESTS();
}
