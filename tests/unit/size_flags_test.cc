// daemon/host/size_flags.h: bytes with a unit, and the earlier MiB names.
#include "daemon/host/size_flags.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kcache {
namespace {

// Parses `args` (without the program name) over a --cache-max-bytes flag (alias --max-cache,
// earlier MiB name --cache-mb) whose default is 7 bytes: the bytes set, or -1 when CLI11
// refused the arguments.
int64_t Parse(std::vector<std::string> args) {
  CLI::App app{"test"};
  uint64_t bytes = 7;
  AddMibAlias(app, "--cache-mb", bytes,
              AddSizeFlag(app, "--cache-max-bytes,--max-cache", bytes, "the cache's bound"));
  std::vector<const char*> argv = {"test"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::ParseError&) {
    return -1;
  }
  return static_cast<int64_t>(bytes);
}

TEST(SizeFlagsTest, APlainNumberIsBytesAndAUnitIsTakenAsGiven) {
  EXPECT_EQ(Parse({}), 7);
  EXPECT_EQ(Parse({"--cache-max-bytes", "4096"}), 4096);
  EXPECT_EQ(Parse({"--cache-max-bytes=64KiB"}), 64 << 10);
  EXPECT_EQ(Parse({"--cache-max-bytes", "3MiB"}), 3 << 20);
  EXPECT_EQ(Parse({"--cache-max-bytes", "2GiB"}), int64_t{2} << 30);
  EXPECT_EQ(Parse({"--cache-max-bytes", "0"}), 0);
}

TEST(SizeFlagsTest, AnAliasInTheSameUnitSetsTheSameBytes) {
  EXPECT_EQ(Parse({"--max-cache", "4096"}), 4096);
  EXPECT_EQ(Parse({"--max-cache", "1MiB"}), 1 << 20);
}

TEST(SizeFlagsTest, AnEarlierMibNameTakesAPlainNumberAsMib) {
  EXPECT_EQ(Parse({"--cache-mb", "3"}), 3 << 20);
  EXPECT_EQ(Parse({"--cache-mb=512"}), 512 << 20);
  EXPECT_EQ(Parse({"--cache-mb", "0"}), 0);
  EXPECT_EQ(Parse({"--cache-mb", "64KiB"}), 64 << 10);
}

TEST(SizeFlagsTest, TheFlagAndItsEarlierNameTogetherAreRefused) {
  EXPECT_EQ(Parse({"--cache-max-bytes", "1", "--cache-mb", "1"}), -1);
  EXPECT_EQ(Parse({"--cache-mb", "1", "--cache-max-bytes", "1"}), -1);
}

TEST(SizeFlagsTest, WhatIsNotASizeIsRefused) {
  EXPECT_EQ(Parse({"--cache-max-bytes", "lots"}), -1);
  EXPECT_EQ(Parse({"--cache-mb", "-1"}), -1);
  EXPECT_EQ(Parse({"--cache-max-bytes", "-5"}), -1);
  EXPECT_EQ(Parse({"--max-cache=-1KiB"}), -1);
}

TEST(SizeFlagsTest, HelpListsTheEarlierNameUnderItsOwnGroup) {
  CLI::App app{"test"};
  uint64_t bytes = 0;
  AddMibAlias(app, "--cache-mb", bytes,
              AddSizeFlag(app, "--cache-max-bytes", bytes, "the cache's bound"));
  std::string help = app.help();
  size_t group = help.find(kEarlierNamesGroup);
  ASSERT_NE(group, std::string::npos) << help;
  EXPECT_LT(help.find("\n  --cache-max-bytes "), group) << help;
  EXPECT_GT(help.find("\n  --cache-mb "), group) << help;
}

}  // namespace
}  // namespace kcache
