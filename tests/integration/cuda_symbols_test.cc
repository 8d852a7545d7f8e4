// Every driver function a process looks up reaches the driver through kcache's libcuda.so.1
// stand-in (client/cuda/cuda_standin.c) as it does without it: a program
// (tests/cuda/cuda_symbols_program.c) looks up each function of the toolkit's stub, and two no
// toolkit has, by dlsym, dlvsym and cuGetProcAddress(_v2) for four CUDA versions and three flags,
// and calls what it found, in front of a fake driver that exports them all
// (tests/cuda/fake_libcuda_every.c), once with the stand-in preloaded and once without. Every
// line is the same (dlvsym finds nothing in either: the driver's symbols have no versions), but
// for the newer driver's functions by dlsym, which the stand-in does not export: why `kcache run`
// does not preload it in front of such a driver
// (RunEnvironmentTest.DriverStandInIsPreloadedAfterNvrtcsOnlyWithADriver), and under `kcache
// run` the program's lines are all the driver's own; kcached counts how each `kcache run`'s
// start check went.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::RunResult;

constexpr char kFutureFunctions[][32] = {"cuKcacheFutureQuery", "cuKcacheFutureQuery_v2"};

std::string StandIn() {
  return (fs::path(testing::KcacheCli()).parent_path() / "cuda/libcuda.so.1").string();
}
std::string FakeDir() { return testing::BinaryPath("tests/fake-cuda-every"); }
std::string Program() { return testing::BinaryPath("tests/cuda_symbols_program"); }

// The program's lines, run with `assignments` and nothing kcache sets.
std::vector<std::string> Lines(const std::string& assignments, const std::string& prefix = "") {
  RunResult run = testing::Run(absl::StrCat(
      "env -u LD_PRELOAD -u KCACHE_REAL_LIBCUDA -u KCACHE_SERVER -u KCACHE_STORE LD_LIBRARY_PATH=",
      FakeDir(), " ", assignments, " ", prefix, Program(), " 2>&1"));
  EXPECT_EQ(run.exit_code, 0) << run.output.substr(0, 2000);
  return absl::StrSplit(run.output, '\n', absl::SkipEmpty());
}

bool OfAFutureFunction(const std::string& line, absl::string_view how) {
  for (const char* name : kFutureFunctions) {
    if (absl::StartsWith(line, absl::StrCat(how, " ", name, " "))) return true;
  }
  return false;
}

class CudaSymbolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(StandIn())) GTEST_SKIP() << "no driver stand-in at " << StandIn();
    if (!fs::exists(FakeDir() + "/libcuda.so.1") || !fs::exists(Program())) {
      GTEST_SKIP() << "no fake driver or cuda_symbols_program (built on x86-64 only)";
    }
  }
  testing::TempDir tmp_;
};

TEST_F(CudaSymbolsTest, EveryFunctionIsFoundAndAnswersAsTheDriversThroughTheStandIn) {
  std::vector<std::string> alone = Lines("");
  std::vector<std::string> through =
      Lines(absl::StrCat("KCACHE_CUDA_CACHE=0 LD_PRELOAD=", StandIn(),
                         " KCACHE_REAL_LIBCUDA=", FakeDir(), "/libcuda.so.1"));
  ASSERT_EQ(alone.size(), through.size());
  ASSERT_GT(alone.size(), 600u * 15);  // every stub function, 15 lookups each
  int missing_alone = 0, differ = 0;
  for (size_t i = 0; i < alone.size(); ++i) {
    if (absl::EndsWith(alone[i], " missing") && !absl::StartsWith(alone[i], "dlvsym ")) {
      ++missing_alone;
    }
    if (OfAFutureFunction(alone[i], "dlsym")) {
      // Not exported by the stand-in: lost to dlsym through it.
      EXPECT_FALSE(absl::EndsWith(alone[i], " missing")) << alone[i];
      EXPECT_TRUE(absl::EndsWith(through[i], " missing")) << through[i];
      continue;
    }
    if (alone[i] != through[i]) {
      if (++differ <= 10) ADD_FAILURE() << "without: " << alone[i] << "\nthrough: " << through[i];
    }
  }
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(missing_alone, 0) << "the fake driver lacks a function the stub has";
  // The newer driver's functions are found through cuGetProcAddress, which the stand-in forwards.
  for (const char* name : kFutureFunctions) {
    std::string line = absl::StrCat("cuGetProcAddress_v2(13000,0)=0,0 ", name, " answers ");
    EXPECT_TRUE(std::any_of(through.begin(), through.end(), [&](const std::string& l) {
      return absl::StartsWith(l, line);
    })) << name;
  }
}

TEST_F(CudaSymbolsTest, UnderKcacheRunEveryFunctionOfANewerDriverIsFound) {
  std::vector<std::string> alone = Lines("");
  std::vector<std::string> run =
      Lines(absl::StrCat("KCACHE_STATE_DIR=", tmp_ / "state"),
            absl::StrCat(testing::KcacheCli(), " run --store ", tmp_ / "store", " --shims ",
                         tmp_ / "shims", " -- "));
  std::vector<std::string> driver_lines;
  for (const std::string& line : run) {
    if (!absl::StartsWith(line, "kcache:")) driver_lines.push_back(line);  // kcache run's notes
  }
  EXPECT_EQ(driver_lines, alone);
}

// `kcache run --server` tells kcached how its start check went (run.cuda_stand_in_*): refused
// in front of the newer driver, preloaded in front of one the stand-in covers
// (tests/fake-cuda), off when the operator switched it off; the command runs either way.
TEST_F(CudaSymbolsTest, KcachedCountsHowEachRunsStartCheckOfTheDriverWent) {
  testing::DaemonOptions options;
  options.extra_flags = {"--no-toolkit"};
  testing::DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  auto run = [&](const std::string& driver_dir, const std::string& assignments) {
    RunResult r = testing::Run(absl::StrCat(
        "env -u LD_PRELOAD -u KCACHE_REAL_LIBCUDA -u KCACHE_STORE LD_LIBRARY_PATH=", driver_dir,
        " KCACHE_STATE_DIR=", tmp_ / "state", " ", assignments, " ", testing::KcacheCli(),
        " run --server ", daemon.address(), " --shims ", tmp_ / "shims",
        " -- sh -c 'echo ran; echo \"$LD_PRELOAD\"' 2>&1"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, "ran")) << r.output;
    return r.output;
  };
  std::string refused = run(FakeDir(), "");
  EXPECT_FALSE(Contains(refused, StandIn())) << refused;
  EXPECT_TRUE(Contains(refused, "functions kcache's driver stand-in does not")) << refused;
  std::string preloaded = run(testing::BinaryPath("tests/fake-cuda"), "");
  EXPECT_TRUE(Contains(preloaded, StandIn())) << preloaded;
  run(testing::BinaryPath("tests/fake-cuda"), "KCACHE_CUDA_STANDIN=0");
  run(testing::BinaryPath("tests/fake-cuda"), "KCACHE_CUDA_STANDIN=0");
  nlohmann::json counters;
  for (int i = 0; i < 50; ++i) {  // the notes are not answered: they arrive when they arrive
    RunResult stat = testing::Run(
        absl::StrCat(testing::KcacheCli(), " stat --json --server ", daemon.address()));
    ASSERT_EQ(stat.exit_code, 0) << stat.output;
    counters = nlohmann::json::parse(stat.output)["counters"];
    if (counters.value("run.cuda_stand_in_off", 0) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(counters.value("run.cuda_stand_in_refused", 0), 1) << counters.dump();
  EXPECT_EQ(counters.value("run.cuda_stand_in_preloaded", 0), 1) << counters.dump();
  EXPECT_EQ(counters.value("run.cuda_stand_in_off", 0), 2) << counters.dump();
}

}  // namespace
}  // namespace kcache
