// Damage to a store's files, the way a bad disk does it, against a real RocksDB: each case
// keeps the intact entries serving, turns the bad one into a miss that the next Put repairs,
// and a writable store that cannot open is moved aside and replaced (replace_if_damaged);
// RepairStore does the same for an offline store.
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "engine/store/store.h"
#include "gtest/gtest.h"
#include "tests/testutil/store_artifacts.h"
#include "tests/testutil/store_faults.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using ::kcache::testing::FileIn;
using ::kcache::testing::FlipBit;
using ::kcache::testing::LiveSstFiles;
using ::kcache::testing::TestArtifact;
using ::kcache::testing::TestKernel;

constexpr uint8_t kArtifacts = 6;  // odd ones small (inline in SSTs), even ones in blob files

size_t SizeOf(uint8_t n) { return n % 2 == 1 ? 300 : 20000; }

class StoreDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Open();
    for (uint8_t n = 1; n <= kArtifacts; ++n)
      ASSERT_TRUE(store->Put(TestArtifact(n, SizeOf(n))).ok());
    ASSERT_TRUE(store->PutKernel(TestKernel("kept")).ok());
  }  // closed: flushed into SST and blob files

  std::unique_ptr<Store> Open() {
    StoreOptions options;
    options.replace_if_damaged = true;
    options.on_event = [this](const StoreEvent& event) { events_.push_back(event); };
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::string Sst(const std::string& family) {
    for (const auto& [name, file] : LiveSstFiles(path_)) {
      if (name == family) return file;
    }
    ADD_FAILURE() << "no SST for " << family;
    return "";
  }
  bool Replaced() const {
    for (const StoreEvent& event : events_) {
      if (event.kind == StoreEvent::Kind::kReplaced) return true;
    }
    return false;
  }
  // Every artifact not in `bad` serves; each bad one is a miss, then served again after a Put.
  void ExpectLocalDamage(Store& store, const std::set<uint8_t>& bad) {
    for (uint8_t n = 1; n <= kArtifacts; ++n) {
      absl::StatusOr<Artifact> got = store.Get(TestArtifact(n, 0).meta.key);
      if (bad.contains(n)) {
        EXPECT_TRUE(absl::IsNotFound(got.status())) << int{n} << ": " << got.status();
        ASSERT_TRUE(store.Put(TestArtifact(n, SizeOf(n))).ok());
        got = store.Get(TestArtifact(n, 0).meta.key);
      }
      ASSERT_TRUE(got.ok()) << int{n} << ": " << got.status();
      EXPECT_EQ(got->bytes, TestArtifact(n, SizeOf(n)).bytes);
      absl::StatusOr<std::vector<ArtifactMeta>> listed =
          store.ListArtifacts(TestArtifact(n, 0).meta.key.kernel_id);
      ASSERT_TRUE(listed.ok()) << listed.status();
      EXPECT_EQ(listed->size(), 1u) << int{n};
    }
  }

  ::kcache::testing::TempDir dir_;
  std::string path_ = dir_ / "store";
  std::vector<StoreEvent> events_;
};

TEST_F(StoreDamageTest, FlippedBitInTheListingKeepsEveryArtifactListedAndServed) {
  FlipBit(Sst("artifact_meta"), 20);  // inside the first (compressed) data block
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(Replaced());
  ExpectLocalDamage(*store, {});
  EXPECT_EQ(store->ListAllArtifacts()->size(), kArtifacts);
  EXPECT_GE(store->Stats()->checksum_failures, 1u);
}

TEST_F(StoreDamageTest, FlippedBitInTheListingIsRebuiltInPlaceByTheFirstScanThatMeetsIt) {
  FlipBit(Sst("artifact_meta"), 20);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // What kcache doctor sees beside the daemon (its own read-only open) before the repair...
  StoreOptions read_only;
  read_only.read_only = true;
  absl::StatusOr<StoreVerifyReport> before = (*OpenStore(path_, read_only))->Verify();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->corrupt.empty());
  // ...the first scan that meets the damage (a warm's, a resolve's) replaces the listing...
  ASSERT_EQ(store->ListAllArtifacts()->size(), kArtifacts);
  uint64_t failures = store->Stats()->checksum_failures;
  EXPECT_GE(failures, 1u);
  // ...and from then on every reader, the daemon's and doctor's, finds it whole.
  for (int i = 0; i < 2; ++i) ASSERT_EQ(store->ListAllArtifacts()->size(), kArtifacts);
  EXPECT_EQ(store->Stats()->checksum_failures, failures);
  absl::StatusOr<StoreVerifyReport> beside = (*OpenStore(path_, read_only))->Verify();
  ASSERT_TRUE(beside.ok()) << beside.status();
  EXPECT_TRUE(beside->corrupt.empty()) << beside->corrupt.front();
  EXPECT_EQ(beside->listings, kArtifacts);
  ExpectLocalDamage(*store, {});
  // Closed and opened again: still whole, the damaged file gone with the old family.
  store.reset();
  store = Open();
  absl::StatusOr<StoreVerifyReport> after = store->Verify();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->corrupt.empty());
  EXPECT_EQ(after->listings, kArtifacts);
  EXPECT_EQ(store->Stats()->checksum_failures, 0u);
}

TEST_F(StoreDamageTest, FlippedBitInTheListingOfABakedStoreIsWorkedAroundNotWritten) {
  FlipBit(Sst("artifact_meta"), 20);
  StoreOptions read_only;
  read_only.read_only = true;
  auto store = *OpenStore(path_, read_only);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(store->ListAllArtifacts()->size(), kArtifacts);
  EXPECT_GE(store->Stats()->checksum_failures, 2u);  // met on every scan: nothing is written
}

TEST_F(StoreDamageTest, FlippedBitInABlobValueIsAMissForThatEntryOnly) {
  FlipBit(FileIn(path_, "", ".blob"), 5000);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  std::set<uint8_t> bad;
  for (uint8_t n = 2; n <= kArtifacts; n += 2) {
    if (!store->Get(TestArtifact(n, 0).meta.key).ok()) bad.insert(n);
  }
  EXPECT_EQ(bad.size(), 1u);
  ExpectLocalDamage(*store, bad);  // a miss again (deleted), then repaired by a Put
}

TEST_F(StoreDamageTest, MissingBlobFileIsAMissForItsEntriesNotAFailingStore) {
  fs::remove(FileIn(path_, "", ".blob"));
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ExpectLocalDamage(*store, {2, 4, 6});
  EXPECT_GE(store->Stats()->checksum_failures, 3u);
}

TEST_F(StoreDamageTest, DamagedManifestIsMovedAsideAndReplaced) {
  std::string manifest = FileIn(path_, "MANIFEST-");
  FlipBit(manifest, static_cast<int64_t>(fs::file_size(manifest) / 2));
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(Replaced());
  EXPECT_TRUE(store->Stats()->replaced_damaged);
  EXPECT_FALSE(FileIn(path_, ".kcache-damaged-").empty());
  ExpectLocalDamage(*store, {1, 2, 3, 4, 5, 6});  // empty, then filled again by Puts
}

TEST_F(StoreDamageTest, TruncatedSstIsMovedAsideAndReplaced) {
  std::string sst = Sst("artifacts");
  fs::resize_file(sst, fs::file_size(sst) / 2);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(Replaced());
  ExpectLocalDamage(*store, {1, 2, 3, 4, 5, 6});
}

TEST_F(StoreDamageTest, DamagedSstMetadataIsMovedAsideAndReplaced) {
  FlipBit(Sst("kernels"), -100);  // the footer's neighbourhood: index and properties
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(Replaced());
  ExpectLocalDamage(*store, {1, 2, 3, 4, 5, 6});
  // Opened again, it is a healthy store: nothing moved aside twice.
  events_.clear();
  store.reset();
  ASSERT_NE(Open(), nullptr);
  EXPECT_FALSE(Replaced());
}

TEST_F(StoreDamageTest, WithoutReplaceADamagedStoreIsDataLossNotAForeignDirectory) {
  std::string manifest = FileIn(path_, "MANIFEST-");
  fs::resize_file(manifest, fs::file_size(manifest) / 2);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path_);
  EXPECT_FALSE(store.ok());
  EXPECT_FALSE(fs::exists(FileIn(path_, ".kcache-damaged-")) &&
               !FileIn(path_, ".kcache-damaged-").empty());
}

TEST_F(StoreDamageTest, RepairStoreFixesAnOfflineStoreEntryByEntry) {
  FlipBit(FileIn(path_, "", ".blob"), 5000);
  FlipBit(Sst("artifact_meta"), 20);
  absl::StatusOr<StoreRepairReport> report = RepairStore(path_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->replaced);
  EXPECT_FALSE(report->problems.empty());
  StoreOptions read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path_, read_only);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<StoreVerifyReport> verified = (*store)->Verify();
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_TRUE(verified->corrupt.empty()) << verified->corrupt.front();
  EXPECT_EQ(verified->artifacts, kArtifacts - 1u);  // the flipped blob value is gone
  EXPECT_EQ(verified->listings, kArtifacts - 1u);
  EXPECT_EQ(verified->kernels, 1u);
}

TEST_F(StoreDamageTest, RepairStoreReplacesAnUnopenableStore) {
  std::string manifest = FileIn(path_, "MANIFEST-");
  FlipBit(manifest, static_cast<int64_t>(fs::file_size(manifest) / 2));
  absl::StatusOr<StoreRepairReport> report = RepairStore(path_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->replaced);
  StoreOptions read_only;
  read_only.read_only = true;
  EXPECT_TRUE(OpenStore(path_, read_only).ok());
}

}  // namespace
}  // namespace kcache
