// PrecompiledHeaders and IncludedNames: which .gch/.pch files a compile may read in place of
// a header it includes.
#include "engine/objects/precompiled_headers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

TEST(PrecompiledHeadersTest, IncludedNamesReadsQuotedAndAngledIncludes) {
  EXPECT_EQ(IncludedNames("#include \"a.h\"\n  #  include <b/c.h>\nint x;\n#define Y\n"
                          "#include MACRO\n#include <>\n#import \"d.h\"\n"),
            (std::vector<std::string>{"a.h", "b/c.h"}));
}

TEST(PrecompiledHeadersTest, FindsAPrecompiledHeaderInAnyIncludeDirectory) {
  testing::TempDir tmp;
  std::string source = tmp.Write("src/k.cpp", "#include \"all.h\"\nint k();\n");
  tmp.Write("inc/all.h", "int k();\n");
  std::string gch = tmp.Write("inc/all.h.gch", "not really a pch");
  tmp.Write("forced/pre.h.gch", "another");
  ParsedCompilerCommand parsed = ParseCompilerCommand(
      CompilerFamily::kGcc,
      {"-I", tmp / "inc", "-include", tmp / "forced/pre.h", "-c", source, "-o", "k.o"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  absl::StatusOr<std::vector<std::string>> found =
      PrecompiledHeaders(parsed.command, "c++", tmp / "build", Environment{});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (std::vector<std::string>{tmp / "forced/pre.h.gch", gch}));
  // Without the -I, all.h.gch is not where the compile looks.
  parsed.command.args = {"-c", source, "-o", "k.o"};
  found = PrecompiledHeaders(parsed.command, "c++", tmp / "build", Environment{});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(found->empty());
  // CPATH counts as an include directory.
  found =
      PrecompiledHeaders(parsed.command, "c++", tmp / "build", Environment{{"CPATH", tmp / "inc"}});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, std::vector<std::string>{gch});
}

TEST(PrecompiledHeadersTest, DirectoryOfPrecompiledHeadersFails) {
  testing::TempDir tmp;
  std::string source = tmp.Write("src/k.cpp", "#include \"all.h\"\n");
  fs::create_directories(tmp / "src/all.h.gch");
  ParsedCompilerCommand parsed =
      ParseCompilerCommand(CompilerFamily::kGcc, {"-c", source, "-o", "k.o"});
  absl::StatusOr<std::vector<std::string>> found =
      PrecompiledHeaders(parsed.command, "c++", tmp / "build", Environment{});
  EXPECT_FALSE(found.ok());
}

}  // namespace
}  // namespace kcache::objects
