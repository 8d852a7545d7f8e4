// A CMake project with a CUDA and a C++ target builds twice from clean, in two build
// directories, the second build hitting every compile: with CMAKE_CXX_COMPILER_LAUNCHER and
// CMAKE_CUDA_COMPILER_LAUNCHER set to kcache, and configured with no kcache variable at all
// under `kcache run`.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testutil/kcache_run.h"
#include "tests/testutil/launcher.h"

namespace kcache {
namespace {

using testing::Contains;

int CountLines(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) {
    ++count;
  }
  return count;
}

class CMakeLauncherTest : public testing::LauncherTest {
 protected:
  void SetUp() override {
    if (testing::Run("command -v cmake && command -v ninja").exit_code != 0) {
      GTEST_SKIP() << "no cmake or ninja";
    }
    tmp_.Write("project/CMakeLists.txt", R"(cmake_minimum_required(VERSION 3.20)
project(launched LANGUAGES CXX CUDA)
set(CMAKE_CUDA_ARCHITECTURES 89)
add_library(launched STATIC a.cpp b.cpp k.cu)
)");
    tmp_.Write("project/a.cpp", "#include \"common.h\"\nint a() { return COMMON; }\n");
    tmp_.Write("project/b.cpp",
               "#include <vector>\nint b() { return std::vector<int>(3).size(); }\n");
    tmp_.Write("project/k.cu",
               "#include \"common.h\"\n__global__ void k(int* p) { *p = COMMON; }\n");
    tmp_.Write("project/common.h", "#define COMMON 3\n");
  }

  // Configures and builds the project in `build`; returns what the launchers logged.
  std::string ConfigureAndBuild(const std::string& build) {
    std::string command = absl::StrCat(
        "cmake -G Ninja -S ", tmp_ / "project", " -B . -DCMAKE_CXX_COMPILER_LAUNCHER=$KCACHE ",
        "-DCMAKE_CUDA_COMPILER_LAUNCHER=$KCACHE -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc ",
        ">/dev/null && ninja -v");
    Build(build, command);
    return last_output_;
  }
};

TEST_F(CMakeLauncherTest, SecondBuildFromCleanHitsEveryCompile) {
  std::string first = ConfigureAndBuild("build1");
  EXPECT_EQ(CountLines(first, "kcache: miss "), 3) << first;
  std::string second = ConfigureAndBuild("build2");
  EXPECT_EQ(CountLines(second, "kcache: hit "), 3) << second;
  EXPECT_EQ(CountLines(second, "kcache: miss "), 0) << second;
  EXPECT_TRUE(testing::SameFile(tmp_ / "build1/CMakeFiles/launched.dir/k.cu.o",
                                tmp_ / "build2/CMakeFiles/launched.dir/k.cu.o"));
}

// Configured and built under `kcache run` with nothing of kcache's on the command line or in
// the project: the environment alone (CMAKE_*_COMPILER_LAUNCHER, CUDACXX, CXX) routes CMake.
TEST_F(CMakeLauncherTest, ConfiguredUnderKcacheRunWithNoKcacheVariableHitsFromClean) {
  const char* kRouting = "CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH";
  std::string script = absl::StrCat("cmake -G Ninja -S ", tmp_ / "project",
                                    " -B . >configure.log 2>&1 || { cat configure.log; exit 1; }\n"
                                    "cmake --build . -v\n");
  testing::RunResult first = testing::RunUnderKcache(tmp_, "run1", script, kRouting);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(CountLines(first.output, "kcache: miss "), 3) << first.output;
  testing::RunResult second = testing::RunUnderKcache(tmp_, "run2", script, kRouting);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(CountLines(second.output, "kcache: hit "), 3) << second.output;
  EXPECT_EQ(CountLines(second.output, "kcache: miss "), 0) << second.output;
  EXPECT_TRUE(testing::SameFile(tmp_ / "run1/CMakeFiles/launched.dir/k.cu.o",
                                tmp_ / "run2/CMakeFiles/launched.dir/k.cu.o"));
}

}  // namespace
}  // namespace kcache
