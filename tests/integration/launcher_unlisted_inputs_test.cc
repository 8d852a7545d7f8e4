// What a compile reads that its command line, its dependency output and the keyed environment
// do not name, each tried against the real compilers: record a compile through the launcher
// (a store directory), change that input, compile again: the second must not be a hit that
// serves the first object (a miss or uncached), and its object must be the real compiler's.
// Also what a hit writes for make: its dependency file names this command's output.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::LauncherEnv;
using testing::Outcome;
using testing::ReadAll;
using testing::RunIn;

// A dependency file's words: targets, prerequisites and phony targets, in order, however the
// lines are broken.
std::vector<std::string> DependencyWords(const std::string& text) {
  std::string joined = absl::StrReplaceAll(text, {{"\\\n", " "}, {" :", ":"}});
  return absl::StrSplit(joined, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

using LauncherUnlistedInputsTest = testing::LauncherTest;

// Two objects from one source with the same flags share an entry; the hit's dependency file
// must name its own object (and, with -MP, the phony targets), as the compiler's does: make
// otherwise never rebuilds the second object when a header changes.
TEST_F(LauncherUnlistedInputsTest, DependencyFileOfAHitNamesThisCommandsOutput) {
  std::string src = tmp_.Write("src/two.cpp", "#include \"two.h\"\nint two() { return TWO; }\n");
  tmp_.Write("src/two.h", "#define TWO 2\n");
  for (const char* phony : {"", "-MP "}) {
    auto command = [&](const std::string& object) {
      return absl::StrCat("$KCACHE c++ -MD ", phony, "-MF ", object, ".d -c ", src, " -o ", object);
    };
    std::string dir = absl::StrCat("b", phony[0] == '\0' ? "" : "-mp");
    fs::create_directories(tmp_ / (dir + "/sub"));
    ASSERT_EQ(Build(dir, command("first.o")), Outcome::kMiss) << last_output_;
    ASSERT_EQ(Build(dir, command("sub/second.o")), Outcome::kHit) << last_output_;
    std::string served = ReadAll(tmp_ / (dir + "/sub/second.o.d"));
    testing::RunResult real =
        RunIn(tmp_ / dir, env_, absl::StrReplaceAll(command("sub/second.o"), {{"$KCACHE ", ""}}));
    ASSERT_EQ(real.exit_code, 0) << real.output;
    EXPECT_EQ(DependencyWords(served), DependencyWords(ReadAll(tmp_ / (dir + "/sub/second.o.d"))))
        << "served:\n"
        << served;
  }
}

}  // namespace
}  // namespace kcache
