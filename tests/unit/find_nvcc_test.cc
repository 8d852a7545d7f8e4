// FindNvcc (engine/keys/compiler_tools.h) behind a shim toolkit root: $CUDA_HOME/bin/nvcc a
// link to kcache is skipped, and $KCACHE_REAL_CUDA_HOME/bin/nvcc, the toolkit it mirrors, is
// the real nvcc, before /usr/local/cuda's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/keys/compiler_tools.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

class FindNvccTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kcache_ = Executable("bin/kcache-launch");
    real_nvcc_ = Executable("real/bin/nvcc");
    fs::create_directories(tmp_ / "shim/bin");
    fs::create_symlink(kcache_, tmp_ / "shim/bin/nvcc");
    lookup_.kcache_binaries = {fs::canonical(kcache_).string()};
    lookup_.env["PATH"] = "/nonexistent";
  }

  std::string Executable(const std::string& name) {
    std::string path = tmp_.Write(name, "#!/bin/sh\n");
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }

  testing::TempDir tmp_;
  std::string kcache_, real_nvcc_;
  ToolLookup lookup_;
};

TEST_F(FindNvccTest, TheRealRootBehindAShimRootComesFirst) {
  lookup_.env["CUDA_HOME"] = tmp_ / "shim";
  lookup_.env["KCACHE_REAL_CUDA_HOME"] = tmp_ / "real";
  absl::StatusOr<std::string> nvcc = FindNvcc(lookup_);
  ASSERT_TRUE(nvcc.ok()) << nvcc.status();
  EXPECT_EQ(*nvcc, real_nvcc_);
}

TEST_F(FindNvccTest, AShimRootAloneIsSkipped) {
  lookup_.env["CUDA_HOME"] = tmp_ / "shim";
  absl::StatusOr<std::string> nvcc = FindNvcc(lookup_);
  if (fs::exists("/usr/local/cuda/bin/nvcc")) {
    ASSERT_TRUE(nvcc.ok()) << nvcc.status();
    EXPECT_EQ(*nvcc, "/usr/local/cuda/bin/nvcc");
  } else {
    EXPECT_FALSE(nvcc.ok());
  }
  // A KCACHE_REAL_CUDA_HOME that is itself a link to kcache is skipped too.
  lookup_.env["KCACHE_REAL_CUDA_HOME"] = tmp_ / "shim";
  lookup_.env["CUDA_HOME"] = tmp_ / "real";
  nvcc = FindNvcc(lookup_);
  ASSERT_TRUE(nvcc.ok()) << nvcc.status();
  EXPECT_EQ(*nvcc, real_nvcc_);
}

}  // namespace
}  // namespace kcache::objects
