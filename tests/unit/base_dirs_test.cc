// engine/keys/base_dirs.h: paths written relative to the base directories, and back.
#include "engine/keys/base_dirs.h"

#include <gtest/gtest.h>

#include <string>

namespace kcache::objects {
namespace {

TEST(BaseDirsTest, NormalizeAndRestoreAtPathBoundaries) {
  BaseDirs dirs{"/tmp/build", {"/src/tree", "/src"}};
  EXPECT_EQ(dirs.Normalize("-I/tmp/build/include"), "-I@cwd@/include");
  EXPECT_EQ(dirs.Normalize("/src/tree/a.cu /src/b.h"), "@base1@/a.cu @base2@/b.h");
  EXPECT_EQ(dirs.Normalize("/tmp/buildx/a.h"), "/tmp/buildx/a.h");
  EXPECT_EQ(dirs.Normalize("/tmp/build"), "@cwd@");
  BaseDirs other{"/pod/ext", {"/other/tree", "/other"}};
  EXPECT_EQ(other.Restore(dirs.Normalize("/tmp/build/x.o: /src/tree/a.cu")),
            "/pod/ext/x.o: /other/tree/a.cu");
}

// kcache's shims directory is written "@shims@" wherever it is and restored to the served
// process's; without one, "@shims@" stays as written (a path that names nothing, so a manifest
// line under it does not hold).
TEST(BaseDirsTest, ShimsDirectoryIsATokenOfItsOwn) {
  BaseDirs image{"/root/.cache/kcache/shims/work", {}, "/root/.cache/kcache/shims"};
  std::string keyed = image.Normalize(
      "-I/root/.cache/kcache/shims/cuda-3f0c5e1d2a4b/include /root/.cache/kcache/shims/work/a.o "
      "PATH=/root/.cache/kcache/shims:/usr/bin /root/.cache/kcache/shimsx");
  EXPECT_EQ(keyed,
            "-I@shims@/cuda-3f0c5e1d2a4b/include @cwd@/a.o PATH=@shims@:/usr/bin "
            "/root/.cache/kcache/shimsx");
  BaseDirs pod{"/work", {}, "/tmp/kcache/shims"};
  EXPECT_EQ(pod.Restore("-I@shims@/cuda-3f0c5e1d2a4b/include"),
            "-I/tmp/kcache/shims/cuda-3f0c5e1d2a4b/include");
  BaseDirs without{"/work", {}};
  EXPECT_EQ(without.Restore("@shims@/nvcc"), "@shims@/nvcc");
  EXPECT_EQ(NormalBaseDir("/tmp/kcache//shims/"), "/tmp/kcache/shims");
  EXPECT_EQ(NormalBaseDir("shims"), "");
}

}  // namespace
}  // namespace kcache::objects
