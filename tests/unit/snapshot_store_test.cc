// Snapshots of cache directories in an object cache (engine/cache_dirs/snapshot_store.h), over a
// real store in a temporary directory: captured and served with their bytes, modes and mtimes;
// chunks shared; a manifest that names paths outside its directory, or one a pod damaged, never
// writes anything; a file already there is left alone.
#include "engine/cache_dirs/snapshot_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "core/sha256.h"
#include "engine/objects/object_bundle.h"
#include "engine/objects/store_object_cache.h"
#include "engine/store/store.h"
#include "tests/testutil/cache_dirs.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::cache_dirs {
namespace {

namespace fs = std::filesystem;

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp_ / "store");
    ASSERT_TRUE(store.ok()) << store.status();
    cache_ = objects::NewOwningStoreObjectCache(*std::move(store));
    key_.components = {{"library", "triton"}, {"sms", "8.6"}};
    key_.digest = CacheDirKeyDigest(key_.components);
  }
  void Write(const std::string& dir, const std::string& relative, const std::string& bytes) {
    fs::path path = fs::path(dir) / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
  }
  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }
  static int64_t MtimeNs(const fs::path& path) {
    struct stat st;
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  }
  // Puts `manifest` under key_ as a capture would.
  void PutManifest(const SnapshotManifest& manifest) {
    objects::ObjectBundle bundle;
    bundle.object = EncodeSnapshotManifest(manifest);
    bundle.deps.targets.push_back("cache-dir snapshot " + key_.digest);
    std::string bytes = objects::EncodeBundle(bundle);
    ObjectEntry entry;
    entry.key = SnapshotManifestKey(key_.digest);
    entry.source = "test";
    entry.size = bytes.size();
    ASSERT_TRUE(cache_->Put(entry, bytes).ok());
  }
  SnapshotManifest OneFile(const std::string& path) {
    SnapshotFile file;
    file.path = path;
    file.size = 3;
    file.sha256 = Sha256Hex("bad");
    file.chunks = {Sha256Hex("bad")};
    return SnapshotManifest{"triton", key_.components, {file}};
  }

  testing::TempDir tmp_;
  std::unique_ptr<objects::ObjectCache> cache_;
  const CacheDirSpec& triton_ = testing::KnownRow("triton");
  CacheDirKey key_;
  std::string from_ = tmp_ / "build/triton";
  std::string to_ = tmp_ / "pod/triton";
};

TEST_F(SnapshotStoreTest, AServedDirectoryHasTheCapturedBytesModesAndMtimes) {
  Write(from_, "AB/add.cubin", "cubin bytes");
  Write(from_, "AB/__grp__add.json", "{}");
  Write(from_, "AB/add.so", "elf");
  Write(from_, "CD/tmp.pid_3_x/half.cubin", "partial");  // the table leaves it out
  fs::permissions(fs::path(from_) / "AB/add.so", fs::perms::owner_exec, fs::perm_options::add);
  fs::last_write_time(fs::path(from_) / "AB/add.cubin",
                      fs::file_time_type(std::chrono::seconds(1700000000)));
  absl::StatusOr<CaptureReport> captured = CaptureSnapshot(*cache_, triton_, from_, key_);
  ASSERT_TRUE(captured.ok()) << captured.status();
  EXPECT_EQ(captured->files, 3u);
  EXPECT_EQ(captured->chunks_stored, 3u);

  absl::StatusOr<ServeReport> served = ServeSnapshot(*cache_, to_, key_);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->files_written, 3u);
  EXPECT_TRUE(served->refused.empty());
  for (const char* file : {"AB/add.cubin", "AB/__grp__add.json", "AB/add.so"}) {
    EXPECT_EQ(Read(fs::path(to_) / file), Read(fs::path(from_) / file)) << file;
    EXPECT_EQ(MtimeNs(fs::path(to_) / file), MtimeNs(fs::path(from_) / file)) << file;
  }
  EXPECT_FALSE(fs::exists(fs::path(to_) / "CD"));
  EXPECT_NE(fs::status(fs::path(to_) / "AB/add.so").permissions() & fs::perms::owner_exec,
            fs::perms::none);
  EXPECT_EQ(fs::status(fs::path(to_) / "AB/add.cubin").permissions() & fs::perms::owner_exec,
            fs::perms::none);
  for (const auto& entry : fs::directory_iterator(fs::path(to_) / "AB")) {
    EXPECT_EQ(entry.path().filename().string().find(".kcache-serve"), std::string::npos);
  }
}

TEST_F(SnapshotStoreTest, ChunksAreSharedAndALargeFileIsServedWhole) {
  std::string big(kSnapshotChunkBytes + 1000, 'x');
  big[17] = 'y';
  Write(from_, "a/big.bin", big);
  Write(from_, "b/big.bin", big);
  absl::StatusOr<CaptureReport> captured = CaptureSnapshot(*cache_, triton_, from_, key_);
  ASSERT_TRUE(captured.ok()) << captured.status();
  EXPECT_EQ(captured->chunks_stored, 2u) << "two chunks, once for both files";
  EXPECT_EQ(captured->chunks_present, 2u);
  ASSERT_TRUE(ServeSnapshot(*cache_, to_, key_).ok());
  EXPECT_EQ(Read(fs::path(to_) / "a/big.bin"), big);
  EXPECT_EQ(Read(fs::path(to_) / "b/big.bin"), big);
}

TEST_F(SnapshotStoreTest, AnotherKeyIsNotServed) {
  Write(from_, "f", "bytes");
  ASSERT_TRUE(CaptureSnapshot(*cache_, triton_, from_, key_).ok());
  CacheDirKey other = key_;
  other.components[1].second = "9.0";
  other.digest = CacheDirKeyDigest(other.components);
  EXPECT_TRUE(absl::IsNotFound(ServeSnapshot(*cache_, to_, other).status()));
  EXPECT_FALSE(fs::exists(to_));
}

TEST_F(SnapshotStoreTest, AnEmptyOrAbsentDirectoryIsNotCaptured) {
  EXPECT_TRUE(absl::IsNotFound(CaptureSnapshot(*cache_, triton_, from_, key_).status()));
  fs::create_directories(from_);
  EXPECT_TRUE(absl::IsFailedPrecondition(CaptureSnapshot(*cache_, triton_, from_, key_).status()));
}

TEST_F(SnapshotStoreTest, AFileAlreadyThereIsLeftAsItIs) {
  Write(from_, "f", "captured");
  Write(from_, "g", "captured too");
  ASSERT_TRUE(CaptureSnapshot(*cache_, triton_, from_, key_).ok());
  Write(to_, "f", "the pod's own");
  absl::StatusOr<ServeReport> served = ServeSnapshot(*cache_, to_, key_);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->files_written, 1u);
  EXPECT_EQ(served->files_present, 1u);
  EXPECT_EQ(served->files_present_same, 0u);
  EXPECT_EQ(Read(fs::path(to_) / "f"), "the pod's own");
  served = ServeSnapshot(*cache_, to_, key_);  // a second serve finds both
  ASSERT_TRUE(served.ok());
  EXPECT_EQ(served->files_present, 2u);
  EXPECT_EQ(served->files_present_same, 1u);
}

TEST_F(SnapshotStoreTest, ManifestsNamingPathsOutsideTheDirectoryWriteNothing) {
  for (const char* path : {"../escape", "/tmp/abs", "a/../../escape", "./a", "a//b", "", "a/."}) {
    PutManifest(OneFile(path));
    absl::StatusOr<ServeReport> served = ServeSnapshot(*cache_, to_, key_);
    EXPECT_TRUE(absl::IsInvalidArgument(served.status())) << path << ": " << served.status();
  }
  EXPECT_FALSE(fs::exists(to_));
  EXPECT_FALSE(fs::exists(tmp_ / "pod/escape"));
  EXPECT_FALSE(fs::exists(tmp_ / "escape"));
}

TEST_F(SnapshotStoreTest, ManifestsPastTheBoundsOrSelfContradictoryAreRefused) {
  SnapshotManifest twice = OneFile("a");
  twice.files.push_back(twice.files[0]);
  PutManifest(twice);
  EXPECT_TRUE(absl::IsInvalidArgument(ServeSnapshot(*cache_, to_, key_).status()));

  SnapshotManifest file_and_folder = OneFile("a");
  file_and_folder.files.push_back(OneFile("a/b").files[0]);
  PutManifest(file_and_folder);
  EXPECT_TRUE(absl::IsInvalidArgument(ServeSnapshot(*cache_, to_, key_).status()));

  SnapshotManifest huge = OneFile("a");
  huge.files[0].size = uint64_t{3} << 30;
  PutManifest(huge);
  EXPECT_TRUE(absl::IsResourceExhausted(ServeSnapshot(*cache_, to_, key_).status()));

  SnapshotLimits few;
  few.max_files = 1;
  PutManifest(twice);
  EXPECT_TRUE(absl::IsResourceExhausted(ServeSnapshot(*cache_, to_, key_, few).status()));

  SnapshotManifest other_key = OneFile("a");
  other_key.components[1].second = "9.0";  // stored under key_, naming another
  PutManifest(other_key);
  EXPECT_TRUE(absl::IsDataLoss(ServeSnapshot(*cache_, to_, key_).status()));
  EXPECT_FALSE(fs::exists(to_));
}

TEST_F(SnapshotStoreTest, ADamagedChunkOrFileIsRefusedAndNotWritten) {
  // A chunk stored under the id of other bytes (what a hostile pod's write could leave).
  objects::ObjectBundle bundle;
  bundle.object = "evil";
  bundle.deps.targets.push_back("cache-dir chunk " + Sha256Hex("bad"));
  std::string bytes = objects::EncodeBundle(bundle);
  ObjectEntry entry;
  entry.key = SnapshotChunkKey(Sha256Hex("bad"));
  entry.source = "test";
  entry.size = bytes.size();
  ASSERT_TRUE(cache_->Put(entry, bytes).ok());
  SnapshotManifest manifest = OneFile("a/f");
  manifest.files[0].size = 4;
  PutManifest(manifest);
  absl::StatusOr<ServeReport> served = ServeSnapshot(*cache_, to_, key_);
  ASSERT_TRUE(served.ok()) << served.status();
  ASSERT_EQ(served->refused.size(), 1u);
  EXPECT_NE(served->refused[0].second.find("damaged"), std::string::npos)
      << served->refused[0].second;
  EXPECT_FALSE(fs::exists(fs::path(to_) / "a/f"));
  EXPECT_TRUE(fs::is_empty(fs::path(to_) / "a")) << "no temporary left behind";

  // A chunk with the right bytes, in a file whose SHA-256 is another's.
  Write(from_, "f", "bad");
  ASSERT_TRUE(CaptureSnapshot(*cache_, triton_, from_, key_).ok());  // the real chunk of "bad"
  manifest = OneFile("g");
  manifest.files[0].sha256 = Sha256Hex("not bad");
  PutManifest(manifest);
  served = ServeSnapshot(*cache_, to_, key_);
  ASSERT_TRUE(served.ok());
  ASSERT_EQ(served->refused.size(), 1u);
  EXPECT_FALSE(fs::exists(fs::path(to_) / "g"));
}

TEST_F(SnapshotStoreTest, ALinkInTheServedDirectoryIsNotFollowed) {
  Write(from_, "sub/f", "bytes");
  ASSERT_TRUE(CaptureSnapshot(*cache_, triton_, from_, key_).ok());
  fs::create_directories(to_);
  fs::create_directories(tmp_ / "elsewhere");
  fs::create_directory_symlink(tmp_ / "elsewhere", fs::path(to_) / "sub");
  absl::StatusOr<ServeReport> served = ServeSnapshot(*cache_, to_, key_);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->refused.size(), 1u);
  EXPECT_TRUE(fs::is_empty(tmp_ / "elsewhere"));

  fs::remove(fs::path(to_) / "sub");
  fs::remove(to_);
  fs::create_directory_symlink(tmp_ / "elsewhere", to_);
  EXPECT_TRUE(absl::IsFailedPrecondition(ServeSnapshot(*cache_, to_, key_).status()));
  EXPECT_TRUE(fs::is_empty(tmp_ / "elsewhere"));
}

TEST_F(SnapshotStoreTest, AManifestRoundTripsAndACutOneIsDataLoss) {
  SnapshotManifest manifest = OneFile("a/b");
  manifest.files[0].mtime_ns = 1700000000123456789;
  manifest.files[0].executable = true;
  std::string bytes = EncodeSnapshotManifest(manifest);
  absl::StatusOr<SnapshotManifest> back = DecodeSnapshotManifest(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->library, "triton");
  EXPECT_EQ(back->components, manifest.components);
  ASSERT_EQ(back->files.size(), 1u);
  EXPECT_EQ(back->files[0].mtime_ns, 1700000000123456789);
  EXPECT_TRUE(back->files[0].executable);
  EXPECT_EQ(back->files[0].chunks, manifest.files[0].chunks);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_TRUE(absl::IsDataLoss(DecodeSnapshotManifest(bytes.substr(0, cut)).status())) << cut;
  }
}

// CompareWithServed: what became of served files, and when the library ignored them.
TEST(SnapshotUseTest, ServedFilesKeptReplacedRemovedAndNewAreToldApart) {
  auto file = [](std::string path, uint64_t size, int64_t mtime) {
    SnapshotFile f;
    f.path = std::move(path);
    f.size = size;
    f.mtime_ns = mtime;
    return f;
  };
  std::vector<SnapshotFile> served = {file("a", 1, 10), file("b", 2, 20), file("c", 3, 30),
                                      file("d", 4, 40)};
  SnapshotListing now;
  now.files = {file("a", 1, 10), file("b", 2, 20), file("c", 3, 31), file("e", 5, 50)};
  SnapshotUse use = CompareWithServed(served, now);
  EXPECT_EQ(use.served, 4u);
  EXPECT_EQ(use.as_served, 2u);
  EXPECT_EQ(use.replaced, 1u);  // c: another mtime
  EXPECT_EQ(use.removed, 1u);   // d
  EXPECT_EQ(use.written_anew, 1u);
  EXPECT_TRUE(use.Ignored()) << "half of what was served replaced or removed";

  now.files = {file("a", 1, 10), file("b", 2, 20), file("c", 3, 30), file("d", 4, 41)};
  EXPECT_FALSE(CompareWithServed(served, now).Ignored()) << "one file updated (cuTile's SQLite)";

  served = {file("a", 1, 10), file("b", 2, 20), file("c", 3, 30)};
  now.files = {file("a", 9, 99), file("new", 1, 1)};
  EXPECT_TRUE(CompareWithServed(served, now).Ignored());

  EXPECT_FALSE(CompareWithServed({}, now).Ignored()) << "nothing served: nothing ignored";
}

}  // namespace
}  // namespace kcache::cache_dirs
