// engine/keys/dep_file.h: nvcc's and gcc's dependency files parsed, and written back.
#include "engine/keys/dep_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kcache::objects {
namespace {

TEST(DepFileTest, ParsesNvccAndGccStylesAndWritesThemBack) {
  DepFile nvcc =
      ParseDepFile("a.o : a.cu \\\n    /usr/include/x.h \\\n    dir\\ with\\ space/y.h\n");
  EXPECT_EQ(nvcc.targets, std::vector<std::string>{"a.o"});
  EXPECT_EQ(nvcc.deps,
            (std::vector<std::string>{"a.cu", "/usr/include/x.h", "dir with space/y.h"}));
  DepFile gcc = ParseDepFile("a.o: a.cc b.h\nb.h:\n");  // -MP phony targets are dropped
  EXPECT_EQ(gcc.deps, (std::vector<std::string>{"a.cc", "b.h"}));
  DepFile again = ParseDepFile(WriteDepFile(nvcc));
  EXPECT_EQ(again.targets, nvcc.targets);
  EXPECT_EQ(again.deps, nvcc.deps);
}

}  // namespace
}  // namespace kcache::objects
