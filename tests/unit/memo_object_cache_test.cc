// daemon/objects/memo_object_cache.h over a real store: answers from memory after the first
// read, never a stale one after a Put or Delete, within its byte bound.
#include "daemon/objects/memo_object_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/sha256.h"
#include "daemon/objects/tiered_object_cache.h"
#include "engine/objects/object_schema.h"
#include "engine/objects/store_object_cache.h"
#include "engine/store/store.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

using testing::TempDir;

CommandKey Key1(const std::string& name) { return CommandKey(Sha256Of(name)); }

ObjectEntry Entry(const CommandKey& key1, const std::string& header_digest) {
  ObjectEntry entry;
  entry.manifest = {{"@base@/a.h", header_digest}};
  entry.key = ObjectEntryKey::Of(key1, entry.manifest);
  entry.source = "@base@/a.cpp";
  entry.fields = {{"compiler", "c++"}};
  return entry;
}

class MemoObjectCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(uint64_t{64} << 20); }

  // The memo over a store at tmp_/store; `store_` is the same store without the memo (what a
  // change behind the memo's back would be).
  void Open(uint64_t max_bytes) {
    memo_.reset();
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp_ / "store");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = NewStoreObjectCache(store->get());
    memo_ = std::make_unique<MemoObjectCache>(NewOwningStoreObjectCache(*std::move(store)),
                                              max_bytes, [this] { ++hits_; });
  }
  void TearDown() override {
    store_.reset();  // borrows the store the memo owns
    memo_.reset();
  }

  std::string Got(const ObjectEntryKey& key) {
    absl::StatusOr<std::string> bytes = memo_->Get(key);
    return bytes.ok() ? *bytes : absl::StrCat("<", bytes.status().ToString(), ">");
  }

  TempDir tmp_;
  std::unique_ptr<ObjectCache> store_;
  std::unique_ptr<MemoObjectCache> memo_;
  std::atomic<int> hits_{0};
};

TEST_F(MemoObjectCacheTest, ListAndGetAreAnsweredFromMemoryAfterTheirFirstRead) {
  ObjectEntry entry = Entry(Key1("a"), "d1");
  ASSERT_TRUE(memo_->Put(entry, "object one").ok());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::vector<ObjectEntry>> listed = memo_->List(entry.key.command);
    ASSERT_TRUE(listed.ok()) << listed.status();
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].manifest, entry.manifest);
    EXPECT_EQ((*listed)[0].source, entry.source);
    EXPECT_EQ(Got(entry.key), "object one");
  }
  EXPECT_EQ(hits_, 4);  // the first List and Get read the store
  EXPECT_GT(memo_->bytes(), 0u);
  // From memory: the store's entry deleted behind the memo is still answered as it was.
  ASSERT_TRUE(store_->Delete(entry.key).ok());
  EXPECT_EQ(Got(entry.key), "object one");
}

TEST_F(MemoObjectCacheTest, PutAndDeleteThroughItAreSeenAtOnce) {
  CommandKey key1 = Key1("a");
  ObjectEntry first = Entry(key1, "d1"), second = Entry(key1, "d2");
  ASSERT_TRUE(memo_->Put(first, "old bytes").ok());
  EXPECT_EQ(Got(first.key), "old bytes");
  EXPECT_EQ(memo_->List(key1)->size(), 1u);
  ASSERT_TRUE(memo_->Put(first, "new bytes").ok());
  ASSERT_TRUE(memo_->Put(second, "second").ok());
  EXPECT_EQ(Got(first.key), "new bytes");
  EXPECT_EQ(memo_->List(key1)->size(), 2u);
  ASSERT_TRUE(memo_->Delete(first.key).ok());
  EXPECT_FALSE(memo_->Get(first.key).ok());
  absl::StatusOr<std::vector<ObjectEntry>> listed = memo_->List(key1);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, second.key);
}

TEST_F(MemoObjectCacheTest, AnEmptyListingIsNotKeptSoAnEntryPutElsewhereIsFound) {
  ObjectEntry entry = Entry(Key1("a"), "d1");
  EXPECT_TRUE(memo_->List(entry.key.command)->empty());
  ASSERT_TRUE(store_->Put(entry, "put by another path").ok());  // e.g. the fleet tier's
  EXPECT_EQ(memo_->List(entry.key.command)->size(), 1u);
  EXPECT_EQ(hits_, 0);
}

TEST_F(MemoObjectCacheTest, ItsByteBoundDropsTheLeastRecentlyUsedAndPassesLargeOnesThrough) {
  Open(4000);  // a quarter, 1000 bytes, the largest kept: four bundles of 900 fit, not five
  std::vector<ObjectEntry> entries;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    entries.push_back(Entry(Key1(name), "d"));
    ASSERT_TRUE(memo_->Put(entries.back(), std::string(900, *name)).ok());
  }
  for (int i : {0, 1, 2, 3, 0}) Got(entries[i].key);  // a used last: b the least recently used
  Got(entries[4].key);                                // e: b goes to make room
  EXPECT_LE(memo_->bytes(), memo_->max_bytes());
  hits_ = 0;
  for (int i : {0, 2, 3, 4}) EXPECT_EQ(Got(entries[i].key), std::string(900, "abcde"[i]));
  EXPECT_EQ(hits_, 4);
  EXPECT_EQ(Got(entries[1].key), std::string(900, 'b'));
  EXPECT_EQ(hits_, 4) << "b was dropped, so it is read from the store";

  ObjectEntry large = Entry(Key1("large"), "d");
  ASSERT_TRUE(memo_->Put(large, std::string(2000, 'x')).ok());
  EXPECT_EQ(Got(large.key), std::string(2000, 'x'));
  EXPECT_EQ(Got(large.key), std::string(2000, 'x'));
  EXPECT_EQ(hits_, 4) << "over a quarter of the bound: never kept";
}

// The store's calls made one at a time: RocksDB's own synchronization is not built for
// ThreadSanitizer here (Debian's library), so readers racing a writer inside it read as a race;
// the lock leaves the memo's own locking the only concurrency under test.
class OneCallAtATime final : public ObjectCache {
 public:
  explicit OneCallAtATime(ObjectCache* inner) : inner_(inner) {}
  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override {
    absl::MutexLock lock(&mu_);
    return inner_->List(key1);
  }
  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    absl::MutexLock lock(&mu_);
    return inner_->Get(key);
  }
  absl::Status Put(const ObjectEntry& entry, std::string bundle) override {
    absl::MutexLock lock(&mu_);
    return inner_->Put(entry, std::move(bundle));
  }
  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override {
    absl::MutexLock lock(&mu_);
    return inner_->ListAll();
  }

 private:
  ObjectCache* const inner_;
  absl::Mutex mu_;
};

TEST_F(MemoObjectCacheTest, ReadersRacingPutsEndWithTheLastPut) {
  MemoObjectCache racing(std::make_unique<OneCallAtATime>(store_.get()), uint64_t{64} << 20);
  ObjectEntry entry = Entry(Key1("a"), "d1");
  ASSERT_TRUE(racing.Put(entry, "v0").ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop) {
        racing.Get(entry.key).IgnoreError();
        racing.List(entry.key.command).IgnoreError();
      }
    });
  }
  for (int v = 1; v <= 200; ++v) ASSERT_TRUE(racing.Put(entry, absl::StrCat("v", v)).ok());
  stop = true;
  for (std::thread& t : readers) t.join();
  for (int i = 0; i < 2; ++i) EXPECT_EQ(*racing.Get(entry.key), "v200");
}

// A bundle answered from memory is recorded as used in the writable store (through the tiered
// cache kcached puts under the memo), so the store's LRU bound evicts what memory does not
// serve: entries put with old last-use times (the store rewrites a use only a minute after the
// last one recorded), the served one set back behind the memo's back, then pushed past the bound.
TEST(MemoObjectCacheBoundTest, BundlesServedFromMemoryAreKeptFromTheStoresEviction) {
  TempDir tmp;
  StoreOptions options;
  options.max_bytes = 100000;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp / "store", options);
  ASSERT_TRUE(store.ok()) << store.status();
  MemoObjectCache memo(NewTieredObjectCache(store->get(), {}, uint64_t{1} << 20),
                       uint64_t{64} << 20);
  std::vector<ObjectEntry> entries;
  for (int i = 0; i < 8; ++i) entries.push_back(Entry(Key1(absl::StrCat("k", i)), "d"));
  auto put_used_at = [&](int i, int64_t used) {
    Artifact artifact =
        ArtifactFromObjectEntry(entries[i], std::string(20000, static_cast<char>('a' + i)));
    artifact.meta.created_unix_ms = used;
    artifact.meta.last_used_unix_ms = used;
    return (*store)->Put(artifact);
  };
  auto stored = [&](int i) {  // a listing, which records no use
    absl::StatusOr<std::vector<ArtifactMeta>> metas =
        (*store)->ListArtifacts(ObjectStoreId(entries[i].key.command));
    return metas.ok() && !metas->empty();
  };
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(put_used_at(i, i + 1).ok());  // at the bound
  ASSERT_TRUE(memo.Get(entries[0].key).ok());  // read from the store, kept in memory
  ASSERT_TRUE(put_used_at(5, 6).ok());         // past the bound: 1 and 2 go
  ASSERT_TRUE(stored(0));
  ASSERT_FALSE(stored(1));
  ASSERT_FALSE(stored(2));
  ASSERT_TRUE(put_used_at(0, 1).ok());  // entry 0's last use set back, the memo unaware
  absl::StatusOr<std::string> served = memo.Get(entries[0].key);  // from memory
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(*served, std::string(20000, 'a'));
  ASSERT_TRUE(put_used_at(6, 7).ok());
  ASSERT_TRUE(put_used_at(7, 8).ok());  // past the bound again: the two least recently used go
  EXPECT_TRUE(stored(0)) << "served from memory, yet evicted as unused";
  EXPECT_FALSE(stored(3));
  EXPECT_FALSE(stored(4));
  for (int i : {5, 6, 7}) EXPECT_TRUE(stored(i)) << i;
}

}  // namespace
}  // namespace kcache::objects
