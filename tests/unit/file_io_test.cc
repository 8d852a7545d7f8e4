// core/file_io.h: a file read whole or not at all, with the reason; a write that a reader sees
// whole or not at all, with nothing left behind when it fails.
#include "core/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;

TEST(FileIoTest, WrittenBytesAreReadBackWholeAndReplaceTheOldFile) {
  testing::TempDir tmp;
  std::string path = tmp / "f.bin";
  std::string bytes("\0one\xff", 5);
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  EXPECT_EQ(*ReadWholeFile(path), bytes);
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  EXPECT_EQ(*ReadWholeFile(path), "two");
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(*ReadWholeFile(path), "");
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path())) entries += entry.exists();
  EXPECT_EQ(entries, 1);  // no temporary file left
}

TEST(FileIoTest, FailuresSayWhatAndLeaveNothing) {
  testing::TempDir tmp;
  absl::StatusOr<std::string> absent = ReadWholeFile(tmp / "absent");
  EXPECT_TRUE(absl::IsNotFound(absent.status())) << absent.status();
  EXPECT_NE(absent.status().message().find("absent"), std::string::npos);
  absl::StatusOr<std::string> directory = ReadWholeFile(tmp.path());
  EXPECT_TRUE(absl::IsFailedPrecondition(directory.status())) << directory.status();
  absl::Status no_dir = WriteFileAtomically(tmp / "no/such/dir/f", "x");
  EXPECT_TRUE(absl::IsPermissionDenied(no_dir)) << no_dir;
  EXPECT_NE(no_dir.message().find("no/such/dir/f"), std::string::npos) << no_dir;
  // A target that cannot be replaced (a directory): the temporary file is removed.
  fs::create_directories(tmp / "target");
  absl::Status over_dir = WriteFileAtomically(tmp / "target", "x");
  EXPECT_TRUE(absl::IsPermissionDenied(over_dir)) << over_dir;
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path())) entries += entry.exists();
  EXPECT_EQ(entries, 1);  // only target/
}

}  // namespace
}  // namespace kcache
