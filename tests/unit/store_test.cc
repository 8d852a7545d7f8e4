// The RocksDB store (engine/store/store.h) against a real RocksDB in a fresh temp dir.
#include "engine/store/store.h"

#include <fcntl.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/options_util.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "engine/store/value_format.h"
#include "gtest/gtest.h"
#include "tests/testutil/store_artifacts.h"

namespace kcache {

// Readable failure messages for keys (found by argument-dependent lookup).
void PrintTo(const ArtifactKey& key, std::ostream* os) { *os << key.ToString(); }

namespace {

namespace fs = std::filesystem;

KernelId IdOf(uint8_t first, uint8_t fill) {
  std::array<uint8_t, KernelId::kSize> bytes;
  bytes.fill(fill);
  bytes[0] = first;
  return KernelId(bytes);
}

Artifact MakeArtifact(const KernelId& id, ArtifactKind kind, const char* target, size_t size,
                      uint64_t seed) {
  Artifact artifact;
  artifact.meta.key = ArtifactKey{id, kind, *ParseTarget(target), "nvrtc-13.0+test", 0};
  artifact.meta.kernel_name = "kernel" + std::to_string(seed);
  artifact.meta.lowered_names = {{"k<float>", "_Z1kIfEvv"}};
  artifact.meta.compile_log = "log " + std::to_string(seed);
  artifact.meta.min_driver = 13000;
  artifact.bytes = ::kcache::testing::TestPayload(size, seed);
  return artifact;
}

// A plain RocksDB handle on a closed store, opened with the options the store wrote.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    rocksdb::ConfigOptions config;
    rocksdb::DBOptions db_options;
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    EXPECT_TRUE(rocksdb::LoadLatestOptions(config, path, &db_options, &families).ok());
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(db_options, path, families, &handles_, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
  }
  ~RawDb() {
    for (auto* handle : handles_) db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  rocksdb::DB* db() { return db_.get(); }
  rocksdb::ColumnFamilyHandle* Family(const std::string& name) {
    for (auto* handle : handles_) {
      if (handle->GetName() == name) return handle;
    }
    ADD_FAILURE() << "no column family " << name;
    return nullptr;
  }
  void FlushAndCompact() {
    ASSERT_TRUE(db_->Flush(rocksdb::FlushOptions(), handles_).ok());
    for (auto* handle : handles_) {
      ASSERT_TRUE(db_->CompactRange(rocksdb::CompactRangeOptions(), handle, nullptr, nullptr).ok());
    }
  }
  // Flips one byte in the middle of the value stored under `key`.
  void FlipValueByte(const std::string& family, const std::string& key) {
    std::string value;
    ASSERT_TRUE(db_->Get(rocksdb::ReadOptions(), Family(family), key, &value).ok());
    value[value.size() / 2] ^= 0x20;
    ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), Family(family), key, value).ok());
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "kcache-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = (fs::path(dir_) / "store").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Store> Open(StoreOptions options = {}) {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::unique_ptr<Store> OpenReadOnly() {
    StoreOptions options;
    options.read_only = true;
    return Open(options);
  }

  std::string dir_;
  std::string path_;
};

void ExpectServed(Store& store, const Artifact& expected) {
  absl::StatusOr<Artifact> got = store.Get(expected.meta.key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, expected.bytes);
  EXPECT_EQ(got->meta.key, expected.meta.key);
  EXPECT_EQ(got->meta.size, expected.bytes.size());
  EXPECT_EQ(got->meta.checksum, PayloadChecksum(expected.bytes));
  EXPECT_EQ(got->meta.kernel_name, expected.meta.kernel_name);
  EXPECT_EQ(got->meta.lowered_names, expected.meta.lowered_names);
  EXPECT_EQ(got->meta.compile_log, expected.meta.compile_log);
  EXPECT_EQ(got->meta.min_driver, expected.meta.min_driver);
  EXPECT_GT(got->meta.created_unix_ms, 0);
}

std::set<ArtifactKey> KeysOf(const std::vector<ArtifactMeta>& metas) {
  std::set<ArtifactKey> keys;
  for (const ArtifactMeta& meta : metas) keys.insert(meta.key);
  return keys;
}

TEST_F(StoreTest, RoundTripsA200KbAndA5MibArtifact) {
  auto store = Open();
  Artifact small = MakeArtifact(IdOf(1, 1), ArtifactKind::kCubin, "sm_89", 200 * 1000, 1);
  Artifact large = MakeArtifact(IdOf(1, 1), ArtifactKind::kPtx, "compute_89", 5 << 20, 2);
  large.bytes.replace(0, 1 << 20, std::string(1 << 20, 'p'));  // partly compressible
  ASSERT_TRUE(store->Put(small).ok());
  ASSERT_TRUE(store->Put(large).ok());
  ExpectServed(*store, small);
  ExpectServed(*store, large);
  absl::StatusOr<Artifact> missing =
      store->Get(MakeArtifact(IdOf(1, 1), ArtifactKind::kCubin, "sm_75", 1, 3).meta.key);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(absl::StrContains(missing.status().message(), "corrupt"));
}

TEST_F(StoreTest, ListArtifactsReturnsOnlyThatKernelsArtifacts) {
  auto store = Open();
  // Neighbouring ids (differing in the last byte) and an all-0xff id test the scan bounds.
  KernelId a = IdOf(0x11, 0x11), b = IdOf(0x11, 0x11), c = IdOf(0xff, 0xff);
  std::array<uint8_t, KernelId::kSize> b_bytes;
  std::copy_n(a.Bytes().data(), KernelId::kSize, b_bytes.begin());
  b_bytes.back() = 0x12;
  b = KernelId(b_bytes);
  std::map<int, std::set<ArtifactKey>> expected;
  int seed = 0;
  for (const auto& [index, id] : std::vector<std::pair<int, KernelId>>{{0, a}, {1, b}, {2, c}}) {
    for (const char* target : {"sm_75", "sm_86", "sm_90a"}) {
      for (ArtifactKind kind : {ArtifactKind::kCubin, ArtifactKind::kLtoir}) {
        Artifact artifact = MakeArtifact(id, kind, target, 100 + seed, seed);
        ++seed;
        ASSERT_TRUE(store->Put(artifact).ok());
        expected[index].insert(artifact.meta.key);
      }
    }
  }
  EXPECT_EQ(KeysOf(*store->ListArtifacts(a)), expected[0]);
  EXPECT_EQ(KeysOf(*store->ListArtifacts(b)), expected[1]);
  EXPECT_EQ(KeysOf(*store->ListArtifacts(c)), expected[2]);
  EXPECT_TRUE(store->ListArtifacts(IdOf(0x11, 0x00))->empty());
  EXPECT_EQ(store->ListAllArtifacts()->size(), 18u);
  absl::StatusOr<std::vector<ArtifactMeta>> listed = store->ListArtifacts(a);
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const ArtifactMeta& meta : *listed) EXPECT_GE(meta.size, 100u);
}

KernelRecord MakeKernel(const std::string& source) {
  KernelRecord record;
  record.spec.name = "k_" + source;
  record.spec.source = source;
  record.spec.headers = {{"common.cuh", "#pragma once\n"}};
  record.spec.options = {"-std=c++17"};
  record.spec.name_expressions = {"k<float>"};
  record.id = ComputeKernelId(record.spec);
  record.arch = {75, 0};
  return record;
}

TEST_F(StoreTest, KernelRecordsRoundTrip) {
  auto store = Open();
  KernelRecord one = MakeKernel("one"), two = MakeKernel("two");
  two.want_ltoir = true;
  ASSERT_TRUE(store->PutKernel(one).ok());
  ASSERT_TRUE(store->PutKernel(two).ok());
  absl::StatusOr<KernelRecord> got = store->GetKernel(two.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->spec.source, "two");
  EXPECT_EQ(got->spec.headers, two.spec.headers);
  EXPECT_EQ(got->spec.options, two.spec.options);
  EXPECT_EQ(got->spec.name_expressions, two.spec.name_expressions);
  EXPECT_EQ(got->arch.min_arch, 75);
  EXPECT_TRUE(got->want_ltoir);
  EXPECT_EQ(store->ListKernels()->size(), 2u);
  EXPECT_EQ(store->GetKernel(MakeKernel("three").id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, ReopenKeepsEverythingAndStatsCountIt) {
  Artifact artifact = MakeArtifact(IdOf(2, 2), ArtifactKind::kCubin, "sm_120", 200000, 7);
  KernelRecord kernel = MakeKernel("kept");
  {
    auto store = Open();
    ASSERT_TRUE(store->Put(artifact).ok());
    ASSERT_TRUE(store->PutKernel(kernel).ok());
  }
  auto store = Open();
  ExpectServed(*store, artifact);
  EXPECT_TRUE(store->GetKernel(kernel.id).ok());
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->artifacts, 1u);
  EXPECT_EQ(stats->kernels, 1u);
  EXPECT_EQ(stats->artifact_bytes, 200000u);
  EXPECT_GE(stats->disk_bytes, 200000u);  // flushed on close: the blob file is on disk
  EXPECT_EQ(stats->checksum_failures, 0u);
  EXPECT_EQ(stats->format_version, kStoreFormatVersion);
}

TEST_F(StoreTest, ReadOnlyOpenSeesCompactedBlobValuesAndRefusesWrites) {
  Artifact big = MakeArtifact(IdOf(3, 3), ArtifactKind::kCubin, "sm_86", 200000, 8);
  Artifact tiny = MakeArtifact(IdOf(3, 3), ArtifactKind::kPtx, "compute_86", 100, 9);
  KernelRecord kernel = MakeKernel("baked");
  {
    auto store = Open();
    ASSERT_TRUE(store->Put(big).ok());
    ASSERT_TRUE(store->Put(tiny).ok());
    ASSERT_TRUE(store->PutKernel(kernel).ok());
  }
  RawDb(path_).FlushAndCompact();
  bool has_blob = false;
  for (const auto& entry : fs::directory_iterator(path_)) {
    has_blob |= entry.path().extension() == ".blob" && entry.file_size() >= 200000;
  }
  ASSERT_TRUE(has_blob);

  auto store = OpenReadOnly();
  ASSERT_NE(store, nullptr);
  ExpectServed(*store, big);
  ExpectServed(*store, tiny);
  EXPECT_EQ(store->ListArtifacts(IdOf(3, 3))->size(), 2u);
  EXPECT_TRUE(store->GetKernel(kernel.id).ok());
  EXPECT_EQ(store->Put(big).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->PutKernel(kernel).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, SecondWritableOpenOfAnOpenStoreIsRefused) {
  auto store = Open();
  absl::StatusOr<std::unique_ptr<Store>> second = OpenStore(path_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  StoreOptions read_only;
  read_only.read_only = true;
  EXPECT_TRUE(OpenStore(path_, read_only).ok());  // readers take no lock
}

TEST_F(StoreTest, OverlongToolkitIdIsRefused) {
  auto store = Open();
  Artifact artifact = MakeArtifact(IdOf(8, 8), ArtifactKind::kCubin, "sm_89", 10, 13);
  artifact.meta.key.toolkit = std::string(256, 't');
  EXPECT_EQ(store->Put(artifact).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Get(artifact.meta.key).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ReadOnlyOpenOfAMissingStoreIsNotFound) {
  StoreOptions options;
  options.read_only = true;
  EXPECT_EQ(OpenStore(path_, options).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(StoreTest, CorruptValueIsCountedNotServedAndDeleted) {
  Artifact artifact = MakeArtifact(IdOf(4, 4), ArtifactKind::kCubin, "sm_89", 200000, 10);
  { ASSERT_TRUE(Open()->Put(artifact).ok()); }
  RawDb(path_).FlipValueByte(kArtifactsFamily, artifact.meta.key.Encode());

  auto store = Open();
  absl::StatusOr<Artifact> got = store->Get(artifact.meta.key);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "corrupt")) << got.status();
  EXPECT_EQ(store->Stats()->checksum_failures, 1u);
  // Deleted with its listing entry: now a plain miss, and gone from listings.
  got = store->Get(artifact.meta.key);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(absl::StrContains(got.status().message(), "corrupt"));
  EXPECT_TRUE(store->ListArtifacts(IdOf(4, 4))->empty());
  EXPECT_EQ(store->Stats()->checksum_failures, 1u);
  ASSERT_TRUE(store->Put(artifact).ok());  // replaced
  ExpectServed(*store, artifact);
}

TEST_F(StoreTest, FlippedByteInABlobFileIsDetectedByAReadOnlyStore) {
  Artifact artifact = MakeArtifact(IdOf(5, 5), ArtifactKind::kCubin, "sm_89", 200000, 11);
  { ASSERT_TRUE(Open()->Put(artifact).ok()); }
  RawDb(path_).FlushAndCompact();
  int flipped = 0;
  for (const auto& entry : fs::directory_iterator(path_)) {
    if (entry.path().extension() != ".blob") continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(file)), {});
    size_t at = content.find(artifact.bytes.substr(100000, 64));  // payload is stored raw
    if (at == std::string::npos) continue;
    file.seekp(static_cast<std::streamoff>(at));
    file.put(static_cast<char>(content[at] ^ 0x01));
    ++flipped;
  }
  ASSERT_EQ(flipped, 1);

  auto store = OpenReadOnly();
  for (int attempt = 1; attempt <= 2; ++attempt) {  // read-only: counted again, never deleted
    absl::StatusOr<Artifact> got = store->Get(artifact.meta.key);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(absl::StrContains(got.status().message(), "corrupt")) << got.status();
    EXPECT_EQ(store->Stats()->checksum_failures, static_cast<uint64_t>(attempt));
  }
}

TEST_F(StoreTest, CorruptListingEntryIsCountedAndRebuiltFromTheArtifact) {
  Artifact artifact = MakeArtifact(IdOf(6, 6), ArtifactKind::kCubin, "sm_89", 5000, 12);
  { ASSERT_TRUE(Open()->Put(artifact).ok()); }
  RawDb(path_).FlipValueByte(kArtifactMetaFamily, artifact.meta.key.Encode());
  {
    auto store = Open();
    absl::StatusOr<std::vector<ArtifactMeta>> listed = store->ListArtifacts(IdOf(6, 6));
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].key, artifact.meta.key);
    EXPECT_EQ(store->Stats()->checksum_failures, 1u);
  }
  auto store = Open();
  EXPECT_EQ(store->ListAllArtifacts()->size(), 1u);
  EXPECT_EQ(store->Stats()->checksum_failures, 0u);  // the rebuilt entry verifies
}

TEST_F(StoreTest, CorruptKernelRecordIsAMissAndLeavesListings) {
  KernelRecord good = MakeKernel("good"), bad = MakeKernel("bad");
  {
    auto store = Open();
    ASSERT_TRUE(store->PutKernel(good).ok());
    ASSERT_TRUE(store->PutKernel(bad).ok());
  }
  RawDb(path_).FlipValueByte(kKernelsFamily, std::string(bad.id.Bytes()));
  auto store = Open();
  EXPECT_EQ(store->ListKernels()->size(), 1u);
  absl::StatusOr<KernelRecord> got = store->GetKernel(bad.id);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->GetKernel(good.id).ok());
  EXPECT_EQ(store->Stats()->checksum_failures, 1u);
}

TEST_F(StoreTest, VerifyReportsEveryCorruptValueAndDeletesNothing) {
  Artifact blob = MakeArtifact(IdOf(7, 7), ArtifactKind::kCubin, "sm_89", 200000, 13);
  Artifact inline_value = MakeArtifact(IdOf(7, 7), ArtifactKind::kPtx, "compute_89", 600, 14);
  Artifact listed_badly = MakeArtifact(IdOf(8, 8), ArtifactKind::kCubin, "sm_80", 900, 15);
  KernelRecord kernel = MakeKernel("verified");
  {
    auto store = Open();
    for (const Artifact* a : {&blob, &inline_value, &listed_badly}) {
      ASSERT_TRUE(store->Put(*a).ok());
    }
    ASSERT_TRUE(store->PutKernel(kernel).ok());
    absl::StatusOr<StoreVerifyReport> clean = store->Verify();
    ASSERT_TRUE(clean.ok()) << clean.status();
    EXPECT_EQ(clean->artifacts, 3u);
    EXPECT_EQ(clean->listings, 3u);
    EXPECT_EQ(clean->kernels, 1u);
    EXPECT_EQ(clean->artifact_bytes, 200000u + 600u + 900u);
    EXPECT_TRUE(clean->corrupt.empty());
  }
  {
    RawDb raw(path_);
    raw.FlipValueByte(kArtifactsFamily, blob.meta.key.Encode());
    raw.FlipValueByte(kArtifactMetaFamily, listed_badly.meta.key.Encode());
    raw.FlipValueByte(kKernelsFamily, std::string(kernel.id.Bytes()));
  }
  for (bool read_only : {true, false}) {
    StoreOptions options;
    options.read_only = read_only;
    auto store = Open(options);
    for (int pass = 1; pass <= 2; ++pass) {  // nothing is deleted: the second pass sees the same
      absl::StatusOr<StoreVerifyReport> report = store->Verify();
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(report->artifacts, 2u);
      EXPECT_EQ(report->artifact_bytes, 600u + 900u);
      EXPECT_EQ(report->listings, 2u);
      EXPECT_EQ(report->kernels, 0u);
      ASSERT_EQ(report->corrupt.size(), 3u);
      EXPECT_TRUE(absl::StrContains(report->corrupt[0], blob.meta.key.ToString()))
          << report->corrupt[0];
      EXPECT_TRUE(absl::StrContains(report->corrupt[1], "listing entry"));
      EXPECT_TRUE(absl::StrContains(report->corrupt[2], kernel.id.Hex()));
    }
    // 3 per Verify, plus the bad listing entry Stats' own scan meets (and, when writable,
    // rebuilds: so this runs after both passes).
    EXPECT_EQ(store->Stats()->checksum_failures, 7u);
  }
}

TEST_F(StoreTest, DirectoryThatIsNotAStoreIsRejectedClearly) {
  fs::create_directories(path_);
  std::ofstream(fs::path(path_) / "notes.txt") << "hello";
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(store.status().message(), "is not a kcache store"))
      << store.status();

  std::string plain = (fs::path(dir_) / "plain").string();
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, plain, &db).ok());
  delete db;
  store = OpenStore(plain);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(store.status().message(), "not a kcache store"));

  EXPECT_EQ(OpenStore((fs::path(path_) / "notes.txt").string()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Another process holding <path>/LOCK as RocksDB takes it (a fcntl write lock), until the
// object goes away: what a kcached, warm or launcher creating the store looks like from here.
class LockHeldByChild {
 public:
  explicit LockHeldByChild(const std::string& path) {
    int ready[2], release[2];
    if (pipe(ready) != 0 || pipe(release) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(release[1]);
      int fd = open((path + "/LOCK").c_str(), O_RDWR | O_CREAT, 0644);
      struct flock lock = {};
      lock.l_type = F_WRLCK;
      lock.l_whence = SEEK_SET;
      char ok = fd >= 0 && fcntl(fd, F_SETLK, &lock) == 0 ? 'y' : 'n';
      if (write(ready[1], &ok, 1) != 1) _exit(1);
      char byte;
      while (read(release[0], &byte, 1) > 0) {
      }
      _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    release_ = release[1];
    char ok = 'n';
    held_ = read(ready[0], &ok, 1) == 1 && ok == 'y';
    close(ready[0]);
  }
  ~LockHeldByChild() {
    if (release_ >= 0) close(release_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  bool held() const { return held_; }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  bool held_ = false;
};

// RocksDB writes a new database with only the default family, then the families, then kcache
// writes the format record: a second opener in between (two launchers of one ninja build on
// a new store) must wait, not call the store foreign or damaged, and never move it aside.
TEST_F(StoreTest, AStoreAnotherProcessIsCreatingIsWaitedOnNeverMovedAside) {
  StoreOptions replacing;
  replacing.replace_if_damaged = true;
  auto families_only = [](const std::string& path, const std::vector<std::string>& names) {
    rocksdb::DBOptions options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const std::string& name : names)
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, path, families, &handles, &db).ok());
    for (rocksdb::ColumnFamilyHandle* handle : handles) db->DestroyColumnFamilyHandle(handle);
    delete db;
  };
  std::string only_default = (fs::path(dir_) / "only-default").string();
  families_only(only_default, {rocksdb::kDefaultColumnFamilyName});
  std::string no_format = (fs::path(dir_) / "no-format").string();
  families_only(no_format, {rocksdb::kDefaultColumnFamilyName, kArtifactsFamily,
                            kArtifactMetaFamily, kKernelsFamily, kMetaFamily});

  for (const std::string& path : {only_default, no_format}) {
    SCOPED_TRACE(path);
    {
      LockHeldByChild creating(path);
      ASSERT_TRUE(creating.held());
      for (bool read_only : {false, true}) {
        StoreOptions options = replacing;
        options.read_only = read_only;
        absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path, options);
        EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
        EXPECT_TRUE(absl::StrContains(store.status().message(), "held for writing by another"))
            << store.status();
      }
      for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
        EXPECT_FALSE(absl::StartsWith(entry.path().filename().string(), ".kcache-damaged"))
            << "moved aside while another process held it";
      }
    }
    // Nobody holds it: what it is shows (foreign, or a store whose creation was interrupted).
    StoreOptions plain;
    EXPECT_NE(OpenStore(path, plain).status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST_F(StoreTest, NewerFormatIsRejectedWithAnUpgradeHint) {
  { ASSERT_NE(Open(), nullptr); }
  {
    RawDb raw(path_);
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.Family(kMetaFamily), kFormatVersionKey,
                          EncodeFormatVersion(kStoreFormatVersion + 1))
                    .ok());
  }
  for (bool read_only : {false, true}) {
    StoreOptions options;
    options.read_only = read_only;
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path_, options);
    EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(store.status().message(),
              "store at " + path_ + " has format 2, this kcache reads up to 1; upgrade kcache");
  }
}

TEST_F(StoreTest, ConcurrentPutsAndGetsFromEightThreads) {
  auto store = Open();
  constexpr int kThreads = 8, kPerThread = 12;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Artifact artifact = MakeArtifact(IdOf(static_cast<uint8_t>(t), static_cast<uint8_t>(i)),
                                         ArtifactKind::kCubin, "sm_80", 6000 + i, t * 100 + i);
        if (!store->Put(artifact).ok()) ++failures;
        absl::StatusOr<Artifact> got = store->Get(artifact.meta.key);
        if (!got.ok() || got->bytes != artifact.bytes) ++failures;
        // Read another thread's earlier key: a hit must be intact, a miss must be clean.
        ArtifactKey other = artifact.meta.key;
        other.kernel_id = IdOf(static_cast<uint8_t>((t + 1) % kThreads), 0);
        absl::StatusOr<Artifact> theirs = store->Get(other);
        int u = (t + 1) % kThreads;
        Artifact expected = MakeArtifact(IdOf(static_cast<uint8_t>(u), 0), ArtifactKind::kCubin,
                                         "sm_80", 6000, u * 100);
        if (theirs.ok() ? theirs->bytes != expected.bytes : !absl::IsNotFound(theirs.status())) {
          ++failures;
        }
        if (!store->ListArtifacts(artifact.meta.key.kernel_id).ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->ListAllArtifacts()->size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(store->Stats()->checksum_failures, 0u);
}

}  // namespace
}  // namespace kcache
