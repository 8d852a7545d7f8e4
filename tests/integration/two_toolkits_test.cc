// Driver-aware compiles with two real toolkits loaded at once: NVRTC 13.0 (the CUDA toolkit)
// and NVRTC 12.9 (the nvidia-cuda-nvrtc-cu12 wheel that scripts/install-deps.sh puts in the
// project's .venv). A 12.8 driver is served the 12.9 toolkit's output, a 13.0 driver 13.0's,
// an 11.8 driver neither (and is told why) — by `kcache get --store` and by a kcached started
// with both --toolkit roots alike. Artifacts of both live side by side and `kcache ls` shows
// which toolkit made each.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/toolkit.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::DaemonOptions;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::KcacheCli;
using ::kcache::testing::RunResult;
using ::kcache::testing::TempDir;

class TwoToolkitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nvrtc129_ = ::kcache::testing::Nvrtc129Root();
    ASSERT_FALSE(nvrtc129_.empty())
        << "no NVRTC 12.9 in " << testing::SourcePath(".venv") << ": run scripts/install-deps.sh "
        << "(requirements/test.txt pins nvidia-cuda-nvrtc-cu12)";
    const char* cuda_home = std::getenv("CUDA_HOME");
    nvrtc130_ = cuda_home != nullptr && *cuda_home != '\0' ? cuda_home : "/usr/local/cuda";
    ::kcache::testing::WriteTestKernelFiles(dir_);
    manifest_ = dir_.Write("manifest.yaml", ::kcache::testing::kTestManifest);
  }
  RunResult Kcache(const std::string& args) {
    return ::kcache::testing::Run(KcacheCli() + " " + args);
  }
  std::string Warmed(const std::string& name) {  // 7.5 only (its PTX runs on 8.9), by NVRTC 13.0
    std::string store = dir_ / name;
    RunResult r =
        Kcache("warm --arch 7.5 --toolkit " + nvrtc130_ + " --store " + store + " " + manifest_);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return store;
  }

  // Resolves saxpy for 8.9 with `driver` through `where` ("--store S --toolkit ..." or
  // "--server ADDR") and checks what was served, or the refusal.
  void Expect(const std::string& where, const std::string& driver, const std::string& rule,
              const std::string& toolkit_prefix, uint32_t min_driver) {
    RunResult r =
        Kcache("get --json " + where + " --device 8.9 --driver " + driver + " --kernel saxpy");
    std::string what = where + " driver " + driver;
    ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    EXPECT_EQ(j["rule"], rule) << what << "\n" << r.output;
    EXPECT_EQ(j["target"], "sm_89") << what;
    EXPECT_EQ(j["toolkit"].get<std::string>().rfind(toolkit_prefix, 0), 0u) << what << "\n"
                                                                            << r.output;
    EXPECT_EQ(j["min_driver"], min_driver) << what;
  }
  void ExpectTooOld(const std::string& where) {
    RunResult r = Kcache("get --json " + where + " --device 8.9 --driver 11080 --kernel saxpy");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(Contains(r.output,
                         "driver 11.8 cannot load code built by NVRTC 12.9 (needs 12.0 or newer); "
                         "load an older toolkit with --toolkit or update the driver"))
        << r.output;
  }

  // The sequence both paths must answer alike.
  void Run(const std::string& where) {
    Expect(where, "13000", "compiled", "nvrtc-13.0+", 13000);    // newest the driver loads
    Expect(where, "12080", "compiled", "nvrtc-12.9+", 12000);    // 13.0 output won't load
    Expect(where, "13000", "exact_sass", "nvrtc-13.0+", 13000);  // both stored: the newest
    Expect(where, "12080", "exact_sass", "nvrtc-12.9+", 12000);
    ExpectTooOld(where);
  }

  TempDir dir_;
  std::string nvrtc129_, nvrtc130_, manifest_;
};

TEST_F(TwoToolkitsTest, KcacheGetCompilesWithTheNewestToolkitTheDriverLoads) {
  std::string store = Warmed("store");
  Run("--store " + store + " --toolkit " + nvrtc130_ + " --toolkit " + nvrtc129_);
  // Side by side, and ls says which toolkit made each.
  RunResult ls = Kcache("ls --json --store " + store);
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  int by129 = 0, by130 = 0;
  for (const auto& k : nlohmann::json::parse(ls.output)) {
    for (const auto& a : k["artifacts"]) {
      std::string toolkit = a["toolkit"];
      by129 += toolkit.rfind("nvrtc-12.9+", 0) == 0;
      by130 += toolkit.rfind("nvrtc-13.0+", 0) == 0;
    }
  }
  EXPECT_EQ(by129, 2) << ls.output;  // sm_89 cubin + compute_89 PTX
  EXPECT_GE(by130, 4) << ls.output;  // the warm's sm_75 + compute_75, and sm_89 + compute_89
  RunResult table = Kcache("ls --store " + store);
  EXPECT_TRUE(Contains(table.output, "12.9")) << table.output;
  EXPECT_TRUE(Contains(table.output, "13.0")) << table.output;
}

TEST_F(TwoToolkitsTest, KcachedCompilesWithTheNewestToolkitTheDriverLoads) {
  DaemonOptions options;
  options.baked = {Warmed("baked")};
  options.extra_flags = {"--toolkit", nvrtc130_, "--toolkit", nvrtc129_};
  DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  Run("--server " + daemon.address());
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

// The wheel toolkit compiles what the bundled kernels include (cuda_fp16.h from the
// cuda_runtime wheel, cub from the cuda_cccl wheel): a 12.8 driver gets every bundled kernel
// that declares no arch above what NVRTC 12.9 supports, built by 12.9.
TEST_F(TwoToolkitsTest, TheWheelToolkitCompilesTheBundledKernelsForA128Driver) {
  std::string store = dir_ / "bundled";
  std::string manifest = testing::SourcePath("kernels/manifest.yaml");
  RunResult warm =
      Kcache("warm --arch 7.5 --toolkit " + nvrtc130_ + " --store " + store + " " + manifest);
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  RunResult ls = Kcache("ls --json --store " + store);
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  int compiled = 0;
  for (const auto& k : nlohmann::json::parse(ls.output)) {
    std::string name = k["name"];
    if (k["min_arch"] != "-" && k["min_arch"].get<std::string>() > "8.6") continue;  // fp8: 8.9
    RunResult r = Kcache("get --json --store " + store + " --toolkit " + nvrtc130_ + " --toolkit " +
                         nvrtc129_ + " --device 8.6 --driver 12080 --kernel " + name);
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    EXPECT_EQ(j["rule"], "compiled") << name;
    EXPECT_EQ(j["toolkit"].get<std::string>().rfind("nvrtc-12.9+", 0), 0u) << name;
    ++compiled;
  }
  EXPECT_GE(compiled, 10);  // all but the FP8 kernel (8.9+)
}

}  // namespace
}  // namespace kcache
