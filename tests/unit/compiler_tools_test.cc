// The tool files a gcc-family command is keyed by, asked of the real c++ here: the programs its
// driver runs, and which of them each kind of command takes.
#include "engine/keys/compiler_tools.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/compiler_command.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

ToolLookup Lookup(const std::string& memo = "") {
  ToolLookup lookup;
  lookup.env = CurrentEnvironment();
  lookup.programs_memo = memo;
  return lookup;
}

std::string Which(const std::string& name) {
  testing::RunResult found = testing::Run("command -v " + name);
  std::string path = found.output.substr(0, found.output.find('\n'));
  return fs::canonical(path).string();
}

std::vector<std::string> Roles(const std::vector<std::string>& args) {
  ParsedCompilerCommand parsed = ParseCompilerCommand(CompilerFamily::kGcc, args);
  EXPECT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  absl::StatusOr<std::vector<ToolFile>> tools = ToolFiles(parsed.command, Which("c++"), Lookup());
  EXPECT_TRUE(tools.ok()) << tools.status();
  std::vector<std::string> roles;
  for (const ToolFile& tool : *tools) {
    EXPECT_FALSE(tool.path.empty()) << tool.role;
    roles.push_back(tool.role);
  }
  return roles;
}

TEST(DriverProgramsTest, NameWhatThisGccRunsAndAreMemoized) {
  testing::TempDir tmp;
  std::string memo = tmp / "state/driver-programs";
  absl::StatusOr<std::vector<ToolFile>> asked = DriverPrograms(Which("c++"), Lookup(memo));
  ASSERT_TRUE(asked.ok()) << asked.status();
  auto path_of = [&](const std::string& role) {
    for (const ToolFile& program : *asked) {
      if (program.role == role) return program.path;
    }
    return std::string("no role ") + role;
  };
  EXPECT_TRUE(absl::EndsWith(path_of("cc1plus"), "/cc1plus")) << path_of("cc1plus");
  EXPECT_TRUE(fs::exists(path_of("cc1plus")));
  EXPECT_EQ(path_of("as"), Which("as"));  // a bare name, found in PATH
  EXPECT_EQ(path_of("linker"), Which("ld"));
  ASSERT_TRUE(fs::exists(memo));
  // The memo's answers are the driver's.
  absl::StatusOr<std::vector<ToolFile>> recalled = DriverPrograms(Which("c++"), Lookup(memo));
  ASSERT_TRUE(recalled.ok());
  ASSERT_EQ(recalled->size(), asked->size());
  for (size_t i = 0; i < asked->size(); ++i) {
    EXPECT_EQ((*recalled)[i].role, (*asked)[i].role);
    EXPECT_EQ((*recalled)[i].path, (*asked)[i].path);
  }
}

TEST(ToolFilesTest, EachKindOfCommandTakesTheProgramsItRuns) {
  using Roles_ = std::vector<std::string>;
  EXPECT_EQ(Roles({"-c", "a.cc", "-o", "a.o"}), (Roles_{"compiler", "cc1plus", "as"}));
  EXPECT_EQ(Roles({"-c", "a.c", "-o", "a.o"}), (Roles_{"compiler", "cc1", "as"}));
  EXPECT_EQ(Roles({"-shared", "-fPIC", "k.cpp", "-o", "k.so"}),
            (Roles_{"compiler", "cc1plus", "as", "collect2", "linker"}));
  EXPECT_EQ(Roles({"a.o", "b.o", "-shared", "-o", "x.so"}),
            (Roles_{"compiler", "collect2", "linker"}));
}

}  // namespace
}  // namespace kcache::objects
