// The writable store's bounds against a real RocksDB: least-recently-used eviction under
// StoreOptions::max_bytes, and a full disk (a fault-injecting RocksDB Env) failing the write
// that found it while the store keeps serving.
#include <rocksdb/env.h>

#include <chrono>
#include <memory>
#include <thread>

#include "engine/store/store.h"
#include "gtest/gtest.h"
#include "tests/testutil/store_artifacts.h"
#include "tests/testutil/store_faults.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::FullDiskFileSystem;
using ::kcache::testing::TestArtifact;
using ::kcache::testing::TestKernel;

class StoreBoundTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> Open(StoreOptions options) {
    options.on_event = [this](const StoreEvent& event) { events_.push_back(event); };
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(dir_ / "store", options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  int EventsOf(StoreEvent::Kind kind) const {
    int n = 0;
    for (const StoreEvent& event : events_) n += event.kind == kind;
    return n;
  }

  ::kcache::testing::TempDir dir_;
  std::vector<StoreEvent> events_;
};

// Artifact n, put with last use n (so the order of use is known without waiting).
Artifact UsedAt(uint8_t n, size_t size) {
  Artifact artifact = TestArtifact(n, size);
  artifact.meta.created_unix_ms = n;
  artifact.meta.last_used_unix_ms = n;
  return artifact;
}

TEST_F(StoreBoundTest, EvictsLeastRecentlyUsedArtifactsPastTheBoundAndCountsThem) {
  StoreOptions options;
  options.max_bytes = 100000;
  auto store = Open(options);
  for (uint8_t n = 1; n <= 5; ++n) ASSERT_TRUE(store->Put(UsedAt(n, 20000)).ok());
  EXPECT_EQ(store->Stats()->evictions, 0u);             // at the bound, not past it
  ASSERT_TRUE(store->Get(UsedAt(1, 0).meta.key).ok());  // 1 is now the most recently used

  ASSERT_TRUE(store->Put(UsedAt(6, 20000)).ok());  // 120000 > 100000: evict down to 90000
  EXPECT_TRUE(store->Get(UsedAt(1, 0).meta.key).ok());
  EXPECT_TRUE(absl::IsNotFound(store->Get(UsedAt(2, 0).meta.key).status()));
  EXPECT_TRUE(absl::IsNotFound(store->Get(UsedAt(3, 0).meta.key).status()));
  for (uint8_t n : {4, 5, 6}) EXPECT_TRUE(store->Get(UsedAt(n, 0).meta.key).ok()) << int{n};
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->evictions, 2u);
  EXPECT_EQ(stats->evicted_bytes, 40000u);
  EXPECT_EQ(stats->artifacts, 4u);
  EXPECT_LE(stats->artifact_bytes, options.max_bytes);
  EXPECT_EQ(stats->max_bytes, options.max_bytes);
  EXPECT_EQ(EventsOf(StoreEvent::Kind::kEvicted), 1);
}

TEST_F(StoreBoundTest, UseRecordedAboveTheStoreSurvivesReopenAndKeepsAnArtifact) {
  StoreOptions options;
  options.max_bytes = 100000;
  {
    auto store = Open(options);
    for (uint8_t n = 1; n <= 5; ++n) ASSERT_TRUE(store->Put(UsedAt(n, 20000)).ok());
    store->RecordUse(UsedAt(2, 0).meta.key);  // served from memory, say: written on close
  }
  auto store = Open(options);
  ASSERT_TRUE(store->Put(UsedAt(6, 20000)).ok());
  EXPECT_TRUE(store->Get(UsedAt(2, 0).meta.key).ok());
  EXPECT_FALSE(store->Get(UsedAt(1, 0).meta.key).ok());
  EXPECT_FALSE(store->Get(UsedAt(3, 0).meta.key).ok());
}

TEST_F(StoreBoundTest, KernelRecordsCountAndGoOnlyWhenNoArtifactNeedsThem) {
  StoreOptions options;
  options.max_bytes = 60000;
  auto store = Open(options);
  KernelRecord orphan = TestKernel(std::string(20000, 'o'));  // no artifacts, registered long ago
  orphan.registered_unix_ms = 1;
  KernelRecord used = TestKernel(std::string(100, 'u'));
  used.registered_unix_ms = 1;
  ASSERT_TRUE(store->PutKernel(orphan).ok());
  ASSERT_TRUE(store->PutKernel(used).ok());
  Artifact artifact = UsedAt(1, 20000);
  artifact.meta.key.kernel_id = used.id;
  ASSERT_TRUE(store->Put(artifact).ok());
  ASSERT_TRUE(store->Put(UsedAt(2, 20000)).ok());  // ~60100 > 60000
  EXPECT_TRUE(absl::IsNotFound(store->GetKernel(orphan.id).status()));
  EXPECT_TRUE(store->GetKernel(used.id).ok());
  EXPECT_TRUE(store->Get(artifact.meta.key).ok());
}

TEST_F(StoreBoundTest, DeletedArtifactsGiveTheirBytesBackToTheBound) {
  StoreOptions options;
  options.max_bytes = 100000;
  {
    auto store = Open(options);
    for (uint8_t n = 1; n <= 5; ++n) ASSERT_TRUE(store->Put(UsedAt(n, 20000)).ok());
    ASSERT_TRUE(store->Delete(UsedAt(1, 0).meta.key).ok());
    ASSERT_TRUE(store->Delete(UsedAt(2, 0).meta.key).ok());
    EXPECT_TRUE(store->Delete(UsedAt(2, 0).meta.key).ok()) << "absent: nothing to do";
    EXPECT_TRUE(absl::IsNotFound(store->Get(UsedAt(1, 0).meta.key).status()));
    EXPECT_EQ(store->ListArtifacts(UsedAt(2, 0).meta.key.kernel_id)->size(), 0u);
    for (uint8_t n = 6; n <= 7; ++n) ASSERT_TRUE(store->Put(UsedAt(n, 20000)).ok());
    EXPECT_EQ(store->Stats()->evictions, 0u) << "back at the bound, not past it";
    EXPECT_EQ(store->Stats()->artifacts, 5u);
  }
  StoreOptions baked;
  baked.read_only = true;
  auto store = Open(baked);
  EXPECT_TRUE(absl::IsFailedPrecondition(store->Delete(UsedAt(3, 0).meta.key)));
  EXPECT_TRUE(store->Get(UsedAt(3, 0).meta.key).ok());
}

TEST_F(StoreBoundTest, ReadOnlyStoreIsNeverEvicted) {
  {
    auto store = Open({});
    for (uint8_t n = 1; n <= 5; ++n) ASSERT_TRUE(store->Put(UsedAt(n, 20000)).ok());
  }
  StoreOptions baked;
  baked.read_only = true;
  baked.max_bytes = 1;
  auto store = Open(baked);
  for (uint8_t n = 1; n <= 5; ++n) EXPECT_TRUE(store->Get(UsedAt(n, 0).meta.key).ok());
  EXPECT_EQ(store->Stats()->evictions, 0u);
  EXPECT_EQ(store->Stats()->artifacts, 5u);
}

class StoreFullDiskTest : public StoreBoundTest {
 protected:
  StoreOptions WithFullDisk() {
    StoreOptions options;
    options.env = env_.get();
    return options;
  }
  std::shared_ptr<FullDiskFileSystem> fs_ = std::make_shared<FullDiskFileSystem>();
  std::unique_ptr<rocksdb::Env> env_ = rocksdb::NewCompositeEnv(fs_);
};

TEST_F(StoreFullDiskTest, LowFreeSpaceFailsTheWriteNotTheStore) {
  auto store = Open(WithFullDisk());
  Artifact kept = TestArtifact(1, 20000);
  ASSERT_TRUE(store->Put(kept).ok());
  fs_->free_bytes = 1 << 20;  // below the 64 MiB kept free
  absl::Status refused = store->Put(TestArtifact(2, 20000));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("disk under"), std::string::npos) << refused;
  EXPECT_TRUE(store->Get(kept.meta.key).ok());
  EXPECT_EQ(store->Stats()->writes_refused_full, 1u);
  EXPECT_EQ(EventsOf(StoreEvent::Kind::kDiskFull), 1);
  fs_->free_bytes = UINT64_MAX;
  EXPECT_TRUE(store->Put(TestArtifact(2, 20000)).ok());
}

TEST_F(StoreFullDiskTest, EnospcFromTheDiskFailsTheWriteAndTheStoreRecoversWhenThereIsRoom) {
  auto store = Open(WithFullDisk());
  Artifact kept = TestArtifact(1, 20000);
  ASSERT_TRUE(store->Put(kept).ok());
  // The disk fills after the store's free-space check: the write fails with ENOSPC, and from
  // then on the file system reports no room until there is.
  fs_->reports_full_after_enospc = true;
  fs_->full = true;
  absl::Status refused = store->Put(TestArtifact(2, 20000));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(store->Get(kept.meta.key).ok());
  EXPECT_TRUE(store->ListAllArtifacts().ok());
  fs_->full = false;
  // RocksDB recovers from ENOSPC on its own once it finds room (its free-space check runs
  // every few seconds); until then writes keep failing cleanly.
  absl::Status again = store->Put(TestArtifact(2, 20000));
  for (int i = 0; i < 300 && !again.ok(); ++i) {
    EXPECT_EQ(again.code(), absl::StatusCode::kResourceExhausted) << again;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    again = store->Put(TestArtifact(2, 20000));
  }
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_TRUE(store->Get(TestArtifact(2, 0).meta.key).ok());
}

TEST_F(StoreFullDiskTest, StoreReopenedOnAFullDiskOpensReadOnlyAndServes) {
  Artifact kept = TestArtifact(1, 20000);
  {
    auto store = Open(WithFullDisk());
    ASSERT_TRUE(store->Put(kept).ok());
  }
  fs_->full = true;
  fs_->free_bytes = 0;
  {
    auto store = Open(WithFullDisk());
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(store->Get(kept.meta.key).ok());
    EXPECT_EQ(store->Put(TestArtifact(2, 100)).code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(store->Stats()->read_only_full);
  }
  fs_->free_bytes = UINT64_MAX;  // ENOSPC only shows when RocksDB writes at open
  auto store = Open(WithFullDisk());
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Get(kept.meta.key).ok());
  EXPECT_EQ(store->Put(TestArtifact(2, 100)).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace kcache
