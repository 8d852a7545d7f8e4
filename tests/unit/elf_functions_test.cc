// Reading a shared library's exported functions from its file (client/cli/elf_functions.h).
#include "client/cli/elf_functions.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/testutil/temp_dir.h"

namespace kcache::cli {
namespace {

constexpr char kStub[] = "/usr/local/cuda/lib64/stubs/libcuda.so";

TEST(ElfFunctionsTest, TheDriverStubsFunctionsAreRead) {
  if (!std::filesystem::exists(kStub)) GTEST_SKIP() << "no " << kStub;
  absl::StatusOr<std::set<std::string>> functions = DynamicFunctions(kStub);
  ASSERT_TRUE(functions.ok()) << functions.status();
  EXPECT_TRUE(functions->contains("cuInit"));
  EXPECT_TRUE(functions->contains("cuModuleLoadData"));
  EXPECT_GT(functions->size(), 300u);
}

// A program's imports are not its functions: /bin/true defines none of the C library's.
TEST(ElfFunctionsTest, ImportedFunctionsAreNotExported) {
  absl::StatusOr<std::set<std::string>> functions = DynamicFunctions("/bin/true");
  ASSERT_TRUE(functions.ok()) << functions.status();
  EXPECT_FALSE(functions->contains("exit"));
}

TEST(ElfFunctionsTest, WhatIsNoElfOrCutShortIsRefusedNamingTheFile) {
  testing::TempDir tmp;
  std::string text = tmp.Write("libtext.so", "not an ELF file at all, but long enough to read");
  absl::StatusOr<std::set<std::string>> refused = DynamicFunctions(text);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(text), std::string::npos) << refused.status();
  if (!std::filesystem::exists(kStub)) return;
  std::string cut = tmp / "libcut.so";
  std::filesystem::copy_file(kStub, cut);
  std::filesystem::resize_file(cut, 4096);  // the headers, not the section table at the end
  EXPECT_FALSE(DynamicFunctions(cut).ok());
  EXPECT_FALSE(DynamicFunctions(tmp / "absent.so").ok());
  EXPECT_FALSE(DynamicFunctions(tmp.path()).ok());  // a directory
}

}  // namespace
}  // namespace kcache::cli
