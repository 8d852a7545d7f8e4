// engine/objects/base_dirs.h: paths written relative to the base directories, and back.
#include "engine/objects/base_dirs.h"

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

}  // namespace
}  // namespace kcache::objects
