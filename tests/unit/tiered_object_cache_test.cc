// The object cache kcached serves: baked stores first, client-made puts into the writable
// store only, never over a baked entry, bounded in size.
#include "daemon/objects/tiered_object_cache.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/objects/object_schema.h"
#include "engine/objects/store_object_cache.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

using testing::TempDir;

ObjectEntry Entry(uint8_t key_byte) {
  std::array<uint8_t, CommandKey::kSize> bytes{};
  bytes[0] = key_byte;
  HeaderManifest manifest = {{"@cwd@/a.h", std::string(64, 'a')}};
  ObjectEntry entry;
  entry.key = ObjectEntryKey::Of(CommandKey(bytes), manifest);
  entry.source = "@cwd@/a.cu";
  entry.manifest = manifest;
  entry.fields = {{"arg", "-O3"}};
  return entry;
}

class TieredObjectCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      absl::StatusOr<std::unique_ptr<Store>> baked = OpenStore(tmp_ / "baked");
      ASSERT_TRUE(baked.ok());
      ASSERT_TRUE(NewStoreObjectCache(baked->get())->Put(Entry(1), "baked bytes").ok());
    }
    StoreOptions read_only;
    read_only.read_only = true;
    absl::StatusOr<std::unique_ptr<Store>> baked = OpenStore(tmp_ / "baked", read_only);
    absl::StatusOr<std::unique_ptr<Store>> local = OpenStore(tmp_ / "local");
    ASSERT_TRUE(baked.ok() && local.ok());
    baked_ = std::move(*baked);
    local_ = std::move(*local);
    cache_ = NewTieredObjectCache(local_.get(), {baked_.get()}, 64);
  }

  TempDir tmp_;
  std::unique_ptr<Store> baked_, local_;
  std::unique_ptr<ObjectCache> cache_;
};

TEST_F(TieredObjectCacheTest, ServesBakedEntriesAndRefusesToReplaceThem) {
  EXPECT_EQ(*cache_->Get(Entry(1).key), "baked bytes");
  absl::Status put = cache_->Put(Entry(1), "client bytes");
  EXPECT_TRUE(absl::IsAlreadyExists(put)) << put;
  EXPECT_EQ(*cache_->Get(Entry(1).key), "baked bytes");
  EXPECT_FALSE(NewStoreObjectCache(local_.get())->Get(Entry(1).key).ok());
}

TEST_F(TieredObjectCacheTest, ClientPutsGoToTheWritableStoreAndAreListedOnce) {
  ASSERT_TRUE(cache_->Put(Entry(2), "client bytes").ok());
  EXPECT_EQ(*NewStoreObjectCache(local_.get())->Get(Entry(2).key), "client bytes");
  absl::StatusOr<std::vector<ObjectEntry>> listed = cache_->List(Entry(2).key.command);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].manifest, Entry(2).manifest);
  EXPECT_EQ((*listed)[0].fields, Entry(2).fields);
  EXPECT_EQ(cache_->ListAll()->size(), 2u);
}

TEST_F(TieredObjectCacheTest, RefusesObjectsOverTheBound) {
  absl::Status refused = cache_->Put(Entry(3), std::string(65, 'x'));
  EXPECT_TRUE(absl::IsResourceExhausted(refused));
  EXPECT_EQ(refused.message(), "an object of 65 bytes is over --object-max-bytes 64");
  EXPECT_FALSE(cache_->Get(Entry(3).key).ok());
  EXPECT_TRUE(cache_->Put(Entry(4), std::string(64, 'x')).ok()) << "the bound itself is allowed";
}

TEST_F(TieredObjectCacheTest, ListsClientMadeEntriesOnlyInBoundedPagesInKeyOrder) {
  for (uint8_t i = 10; i < 40; ++i) ASSERT_TRUE(cache_->Put(Entry(i), "x").ok());
  std::vector<std::string> keys;
  std::string after;
  int pages = 0;
  do {
    absl::StatusOr<ObjectPage> page = cache_->ListClientMade(after);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_FALSE(page->entries.empty());
    for (const ObjectEntry& entry : page->entries)
      keys.push_back(ObjectStoreKey(entry.key).Encode());
    after = page->next_after;
    ++pages;
  } while (!after.empty() && pages < 100);
  EXPECT_EQ(pages, 1);          // 30 small entries: one page
  ASSERT_EQ(keys.size(), 30u);  // the baked entry is not client-made
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

}  // namespace
}  // namespace kcache::objects
