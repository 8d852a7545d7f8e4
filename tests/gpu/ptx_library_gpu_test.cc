// Libraries that ship only PTX, loaded through kcache on a real GPU (docs/ptx-libraries.md,
// "Serving at load"; docs/gpu-tests.md): a PTX-only fatbin and the same PTX as text, warmed for
// the GPU's SM by `kcache warm --library`, load in a new process under `kcache run --server`
// (the driver stand-in preloaded), are handed the stored SASS, and compute what the driver's own
// JIT of the PTX computes. Exits 125 without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/library.h"
#include "tests/gpu/cuda_launch_api.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::gpu_test {
namespace {

namespace fs = std::filesystem;
using ::kcache::testing::Contains;
using ::kcache::testing::RunResult;
using ::kcache::testing::TempDir;

const GpuProbe* g_gpu = nullptr;  // set by main once a GPU was found

constexpr char kSource[] =
    R"(extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

// What cuda_load_program's axpy prints for x[i] = i, y[i] = 1, a = 2, 4096 elements:
// sum(2i + 1) = 4096 * 4095 + 4096.
constexpr char kAxpySum[] = "axpy 16777216.0";

std::string Program() {
  return (fs::read_symlink("/proc/self/exe").parent_path() / "cuda_load_program").string();
}

class PtxLibraryGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string nvcc = "/usr/local/cuda/bin/nvcc";
    if (!fs::exists(nvcc)) GTEST_SKIP() << "no nvcc at " << nvcc;
    if (!fs::exists(Program())) GTEST_SKIP() << "no " << Program();
    std::string cu = dir_.Write("axpy.cu", kSource);
    RunResult built = testing::Run(nvcc + " -fatbin -gencode arch=compute_75,code=compute_75 -o " +
                                   (dir_ / "ptx75.fatbin") + " " + cu);
    ASSERT_EQ(built.exit_code, 0) << built.output;
    // The PTX as the fatbin holds it (nvcc's own .ptx differs: fatbinary strips its comments).
    absl::StatusOr<fatbin::Library> library = fatbin::Library::Read(dir_ / "ptx75.fatbin");
    ASSERT_TRUE(library.ok()) << library.status();
    ASSERT_EQ(library->entries().size(), 1u);
    absl::StatusOr<std::string> ptx = fatbin::EntryPayload(library->entries()[0], "ptx75.fatbin");
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    dir_.Write("ptx75.ptx", *ptx);
    std::string sm = absl::StrCat(g_gpu->sm_major, ".", g_gpu->sm_minor);
    RunResult warmed =
        testing::Run(testing::KcacheCli() + " warm --library " + (dir_ / "ptx75.fatbin") +
                     " --arch " + sm + " --store " + (dir_ / "baked"));
    ASSERT_EQ(warmed.exit_code, 0) << warmed.output;
    testing::DaemonOptions options;
    options.baked = {dir_ / "baked"};
    options.extra_flags = {"--no-toolkit"};
    kcached_ = std::make_unique<testing::DaemonProcess>(options);
    ASSERT_TRUE(kcached_->Start().ok()) << kcached_->Log();
  }

  // cuda_load_program loading `file` by `mode` and running its axpy: bare (the driver JITs the
  // PTX, its cache off) or under `kcache run --server`.
  RunResult Load(const std::string& mode, const std::string& file, bool through_kcache) {
    std::string env = absl::StrCat("env CUDA_CACHE_DISABLE=1 CUDA_LOAD_RUN=axpy KCACHE_LOG=1 ",
                                   "KCACHE_STATE_DIR=", dir_ / "state", " ");
    std::string kcache =
        through_kcache ? absl::StrCat(testing::KcacheCli(), " run --server ", kcached_->address(),
                                      " --shims ", dir_ / "shims", " -- ")
                       : "";
    return testing::Run(env + kcache + Program() + " " + mode + " " + file);
  }

  TempDir dir_;
  std::unique_ptr<testing::DaemonProcess> kcached_;
};

TEST_F(PtxLibraryGpuTest, PtxOnlyFatbinIsServedSassAndComputesAsTheDriversJit) {
  // Module loads (cuda_load_program runs a module's axpy; a library's kernels it does not).
  for (const char* mode : {"data", "dataex", "fatbinary", "procaddress"}) {
    RunResult jit = Load(mode, dir_ / "ptx75.fatbin", false);
    ASSERT_EQ(jit.exit_code, 0) << mode << "\n" << jit.output;
    EXPECT_TRUE(Contains(jit.output, kAxpySum)) << mode << "\n" << jit.output;
    RunResult served = Load(mode, dir_ / "ptx75.fatbin", true);
    ASSERT_EQ(served.exit_code, 0) << mode << "\n" << served.output;
    EXPECT_TRUE(Contains(served.output, "SASS served by kcache")) << mode << "\n" << served.output;
    EXPECT_TRUE(Contains(served.output, kAxpySum)) << mode << "\n" << served.output;
  }
}

TEST_F(PtxLibraryGpuTest, PtxTextIsServedSassAndComputesAsTheDriversJit) {
  RunResult jit = Load("data", dir_ / "ptx75.ptx", false);
  ASSERT_EQ(jit.exit_code, 0) << jit.output;
  EXPECT_TRUE(Contains(jit.output, kAxpySum)) << jit.output;
  RunResult served = Load("data", dir_ / "ptx75.ptx", true);
  ASSERT_EQ(served.exit_code, 0) << served.output;
  EXPECT_TRUE(Contains(served.output, "SASS served by kcache")) << served.output;
  EXPECT_TRUE(Contains(served.output, kAxpySum)) << served.output;
}

}  // namespace
}  // namespace kcache::gpu_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  static kcache::gpu_test::GpuProbe gpu = kcache::gpu_test::ProbeGpuOrExit();
  kcache::gpu_test::g_gpu = &gpu;
  return RUN_ALL_TESTS();
}
