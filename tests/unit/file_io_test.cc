// core/file_io.h: a file read whole or not at all, with the reason; a write that a reader sees
// whole or not at all, with nothing left behind when it fails.
#include "core/file_io.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/time/clock.h"
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

// With a deadline: a writer that keeps the pipe open and silent is given up on at the deadline;
// one that closes in time is read whole.
TEST(FileIoTest, ReadToEndGivesUpOnAPipeWhoseEndDoesNotComeByTheDeadline) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "part", 4), 4);
  absl::Time start = absl::Now();
  absl::StatusOr<std::string> silent =
      ReadToEnd(fds[0], 1 << 20, absl::Now() + absl::Milliseconds(200));
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(silent.status().code(), absl::StatusCode::kDeadlineExceeded) << silent.status();
  EXPECT_GE(took, absl::Milliseconds(190));
  EXPECT_LT(took, absl::Seconds(5));
  close(fds[1]);
  absl::StatusOr<std::string> ended = ReadToEnd(fds[0], 1 << 20, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(*ended, "");  // "part" went to the read that gave up
  close(fds[0]);
}

// A pipe read to its end, in pieces larger and smaller than one read; past the bound, an error.
TEST(FileIoTest, ReadToEndTakesAPipeWholeUpToTheBound) {
  signal(SIGPIPE, SIG_IGN);  // the writer past the bound writes to a closed pipe
  std::string sent(200000, 'x');
  for (uint64_t bound : {uint64_t{200000}, uint64_t{199999}}) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    std::thread writer([&] {
      for (size_t at = 0; at < sent.size();) {
        ssize_t n = write(fds[1], sent.data() + at, std::min<size_t>(7000, sent.size() - at));
        if (n <= 0) break;  // the reader stopped at the bound
        at += static_cast<size_t>(n);
      }
      close(fds[1]);
    });
    absl::StatusOr<std::string> read = ReadToEnd(fds[0], bound);
    close(fds[0]);
    writer.join();
    if (bound == sent.size()) {
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(*read, sent);
    } else {
      EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted) << read.status();
    }
  }
}

}  // namespace
}  // namespace kcache
