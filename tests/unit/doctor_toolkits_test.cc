// OtherToolkitRoots (client/cli/doctor.h): which other CUDA toolkits doctor lists.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "client/cli/doctor.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

void MakeToolkit(const fs::path& root) {
  fs::create_directories(root / "include");
  std::ofstream(root / "include" / "nvrtc.h") << "// nvrtc\n";
}

TEST(DoctorToolkitsTest, ListsEachOtherToolkitOnceByItsRealPath) {
  kcache::testing::TempDir dir;
  fs::path parent = fs::path(dir.path());
  MakeToolkit(parent / "cuda-12.4");
  MakeToolkit(parent / "cuda-13.0");
  fs::create_directory_symlink(parent / "cuda-13.0", parent / "cuda");  // the usual link
  fs::create_directories(parent / "cuda-11.8" / "lib64");  // no nvrtc.h: a leftover folder
  fs::create_directories(parent / "cudnn" / "include");
  std::ofstream(parent / "cudnn" / "include" / "nvrtc.h") << "";  // not a cuda* folder

  std::vector<std::string> others = OtherToolkitRoots(parent.string(), (parent / "cuda").string());
  std::string canonical_parent = fs::canonical(parent).string();
  EXPECT_EQ(others, std::vector<std::string>{canonical_parent + "/cuda-12.4"});

  std::vector<std::string> all = OtherToolkitRoots(parent.string(), "/nonexistent");
  EXPECT_EQ(all, (std::vector<std::string>{canonical_parent + "/cuda-12.4",
                                           canonical_parent + "/cuda-13.0"}));
}

TEST(DoctorToolkitsTest, AMissingParentListsNothing) {
  EXPECT_TRUE(OtherToolkitRoots("/nonexistent/kcache", "/usr/local/cuda").empty());
}

}  // namespace
}  // namespace kcache::cli
