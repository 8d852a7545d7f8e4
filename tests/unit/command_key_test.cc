// engine/keys/command_key.h: key1 is the same for the same command, inputs and environment,
// differs when any keyed field does, and is refused for an unreadable source or a time macro.
#include "engine/keys/command_key.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

using testing::TempDir;

class CommandKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_.Write("a.cc", "int a() { return 1; }\n");
    tmp_.Write("cc1plus", "tool bytes\n");
  }

  absl::StatusOr<ObjectKey> Key(const std::vector<std::string>& args, const Environment& env = {},
                                UncachedReason* reason = nullptr) {
    ParsedCompilerCommand parsed = ParseCompilerCommand(CompilerFamily::kGcc, args);
    EXPECT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
    FileDigests digests("");
    UncachedReason ignored = UncachedReason::kNone;
    return ComputeObjectKey(parsed.command, {{"cc1plus", tmp_ / "cc1plus"}}, env,
                            BaseDirs{tmp_.path(), {}}, digests, reason ? reason : &ignored);
  }

  TempDir tmp_;
};

TEST_F(CommandKeyTest, SameInputsSameKeyAndEachFieldCounts) {
  absl::StatusOr<ObjectKey> key = Key({"-O2", "-c", "a.cc", "-o", "a.o"});
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(Key({"-O2", "-c", "a.cc", "-o", "a.o"})->key1, key->key1);
  EXPECT_EQ(key->source, "a.cc");  // as written, base directories normalized
  EXPECT_EQ(key->fields.front(), KeyField("compiler", "gcc"));
  EXPECT_NE(Key({"-O3", "-c", "a.cc", "-o", "a.o"})->key1, key->key1);
  tmp_.Write("a.cc", "int a() { return 2; }\n");
  EXPECT_NE(Key({"-O2", "-c", "a.cc", "-o", "a.o"})->key1, key->key1);
  tmp_.Write("a.cc", "int a() { return 1; }\n");
  tmp_.Write("cc1plus", "another tool\n");
  EXPECT_NE(Key({"-O2", "-c", "a.cc", "-o", "a.o"})->key1, key->key1);
}

TEST_F(CommandKeyTest, UnreadableSourceAndTimeMacrosAreNotKeyed) {
  UncachedReason reason = UncachedReason::kNone;
  EXPECT_FALSE(Key({"-c", "missing.cc", "-o", "m.o"}, {}, &reason).ok());
  EXPECT_EQ(reason, UncachedReason::kUnreadableInput);
  tmp_.Write("t.cc", "const char* built = __TIME__;\n");
  EXPECT_FALSE(Key({"-c", "t.cc", "-o", "t.o"}, {}, &reason).ok());
  EXPECT_EQ(reason, UncachedReason::kTimeMacros);
}

}  // namespace
}  // namespace kcache::objects
