// What a snapshot of a cache directory takes (engine/cache_dirs/snapshot_files.h), on real
// directories: regular files with their sizes, times and digests; links, FIFOs, the table's
// temporaries, files over a bound and what is past the count, byte and depth bounds are
// skipped and said; nothing a link names outside the directory is read.
#include "engine/cache_dirs/snapshot_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/sha256.h"
#include "tests/testutil/cache_dirs.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::cache_dirs {
namespace {

namespace fs = std::filesystem;

std::string WhySkipped(const SnapshotListing& listing, const std::string& path) {
  for (const auto& [skipped, why] : listing.skipped) {
    if (skipped == path) return why;
  }
  return "";
}

class SnapshotFilesTest : public ::testing::Test {
 protected:
  void Write(const std::string& relative, const std::string& bytes) {
    fs::path path = fs::path(dir_) / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
  }
  testing::TempDir tmp_;
  std::string dir_ = tmp_ / "triton";
  const CacheDirSpec& triton_ = testing::KnownRow("triton");
};

TEST_F(SnapshotFilesTest, TakesRegularFilesWithTheirTimesAndDigests) {
  Write("AB/add.cubin", "cubin bytes");
  Write("AB/__grp__add.json", "{}");
  Write("CD/tmp.pid_3_x/half.cubin", "partial");
  fs::last_write_time(fs::path(dir_) / "AB/add.cubin",
                      fs::file_time_type(std::chrono::seconds(1700000000)));
  absl::StatusOr<SnapshotListing> listing = ListSnapshotFiles(triton_, dir_);
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->files.size(), 2u);
  EXPECT_EQ(listing->files[0].path, "AB/__grp__add.json");
  EXPECT_EQ(listing->files[1].path, "AB/add.cubin");
  EXPECT_EQ(listing->files[1].size, 11u);
  EXPECT_EQ(listing->files[1].sha256, Sha256Hex("cubin bytes"));
  struct stat st;
  ASSERT_EQ(stat((fs::path(dir_) / "AB/add.cubin").c_str(), &st), 0);
  EXPECT_EQ(listing->files[1].mtime_ns, st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
  EXPECT_EQ(listing->bytes, 13u);
  EXPECT_EQ(WhySkipped(*listing, "CD/tmp.pid_3_x/half.cubin"), "left out by the table");
}

TEST_F(SnapshotFilesTest, LinksAndSpecialFilesAreSkippedAndNothingOutsideIsRead) {
  std::string secret = tmp_ / "secret";
  std::ofstream(secret) << "host file";
  fs::create_directories(tmp_ / "outside");
  std::ofstream(tmp_ / "outside/x") << "outside";
  Write("AB/real.cubin", "r");
  fs::create_symlink(secret, fs::path(dir_) / "AB/link.cubin");
  fs::create_directory_symlink(tmp_ / "outside", fs::path(dir_) / "dirlink");
  ASSERT_EQ(mkfifo((fs::path(dir_) / "AB/fifo").c_str(), 0600), 0);
  absl::StatusOr<SnapshotListing> listing = ListSnapshotFiles(triton_, dir_);
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->files.size(), 1u);
  EXPECT_EQ(listing->files[0].path, "AB/real.cubin");
  EXPECT_EQ(WhySkipped(*listing, "AB/link.cubin"), "a link: not followed");
  EXPECT_EQ(WhySkipped(*listing, "dirlink"), "a link: not followed");
  EXPECT_EQ(WhySkipped(*listing, "AB/fifo"), "not a regular file (a device, FIFO or socket)");

  std::string linked_root = tmp_ / "root-link";
  fs::create_directory_symlink(dir_, linked_root);
  EXPECT_EQ(ListSnapshotFiles(triton_, linked_root).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ListSnapshotFiles(triton_, tmp_ / "absent").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SnapshotFilesTest, BoundsOnAFileTheCountTheBytesAndTheDepthHold) {
  Write("a/big.bin", std::string(100, 'b'));
  for (int i = 0; i < 5; ++i) Write("b/f" + std::to_string(i), std::string(10, 'x'));
  std::string deep = "c";
  for (int i = 0; i < 5; ++i) deep += "/d";
  Write(deep + "/deep.bin", "deep");
  SnapshotLimits limits;
  limits.max_file_bytes = 50;
  limits.max_files = 3;
  limits.max_depth = 3;
  absl::StatusOr<SnapshotListing> listing = ListSnapshotFiles(triton_, dir_, limits);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(listing->files.size(), 3u);
  EXPECT_EQ(WhySkipped(*listing, "a/big.bin"), "100 B: over the 50 B bound of one file");
  EXPECT_EQ(WhySkipped(*listing, "b/f3"), "past the 3 files bound");
  EXPECT_EQ(WhySkipped(*listing, "c/d/d/d"), "deeper than 3 folders");
  limits.max_files = 100;
  limits.max_total_bytes = 25;
  listing = ListSnapshotFiles(triton_, dir_, limits);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(listing->files.size(), 2u);
  EXPECT_EQ(listing->bytes, 20u);
  EXPECT_EQ(WhySkipped(*listing, "b/f2"), "past the 25 B bound");
}

}  // namespace
}  // namespace kcache::cache_dirs
