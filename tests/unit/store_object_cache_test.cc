// engine/objects/store_object_cache.h: the object cache over a real store, beside the kernels'
// artifacts in it.
#include "engine/objects/store_object_cache.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/artifact.h"
#include "core/target.h"
#include "engine/objects/object_schema.h"
#include "engine/store/store.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

ObjectEntry Entry(uint8_t command_byte, const std::string& header_digest) {
  std::array<uint8_t, CommandKey::kSize> bytes{};
  bytes[0] = command_byte;
  ObjectEntry entry;
  entry.manifest = {{"@cwd@/a.h", header_digest}};
  entry.key = ObjectEntryKey::Of(CommandKey(bytes), entry.manifest);
  entry.source = "@cwd@/a.cu";
  entry.fields = {{"arg", "-O2"}};
  return entry;
}

class StoreObjectCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp_ / "store");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    cache_ = NewStoreObjectCache(store_.get());
  }

  testing::TempDir tmp_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ObjectCache> cache_;
};

TEST_F(StoreObjectCacheTest, EntriesAreListedUnderTheirCommandAndReadBack) {
  ObjectEntry a = Entry(1, std::string(32, 'a'));
  ObjectEntry b = Entry(1, std::string(32, 'b'));  // the same command, other headers
  ObjectEntry c = Entry(2, std::string(32, 'a'));
  ASSERT_TRUE(cache_->Put(a, "bundle a").ok());
  ASSERT_TRUE(cache_->Put(b, "bundle b").ok());
  ASSERT_TRUE(cache_->Put(c, "bundle c").ok());

  absl::StatusOr<std::vector<ObjectEntry>> listed = cache_->List(a.key.command);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  for (const ObjectEntry& entry : *listed) {
    EXPECT_EQ(entry.key.command, a.key.command);
    EXPECT_EQ(entry.source, a.source);
    EXPECT_EQ(entry.fields, a.fields);
    EXPECT_EQ(entry.size, 8u);
    EXPECT_TRUE(entry.manifest == a.manifest || entry.manifest == b.manifest);
  }
  EXPECT_EQ(*cache_->Get(a.key), "bundle a");
  EXPECT_EQ(*cache_->Get(b.key), "bundle b");
  EXPECT_EQ(*cache_->Get(c.key), "bundle c");
  absl::StatusOr<HeldBytes> held = cache_->GetHeld(c.key);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->bytes, "bundle c");
}

TEST_F(StoreObjectCacheTest, WhatIsAbsentIsAnEmptyListingOrNotFound) {
  ObjectEntry a = Entry(3, std::string(32, 'a'));
  absl::StatusOr<std::vector<ObjectEntry>> listed = cache_->List(a.key.command);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_TRUE(absl::IsNotFound(cache_->Get(a.key).status()));
  ObjectEntryKey other_id = a.key;
  other_id.entry_id = std::string(64, '0');
  ASSERT_TRUE(cache_->Put(a, "bundle").ok());
  EXPECT_TRUE(absl::IsNotFound(cache_->Get(other_id).status()));
}

TEST_F(StoreObjectCacheTest, KernelsArtifactsBesideThemAreNeverListedAsObjects) {
  ObjectEntry a = Entry(4, std::string(32, 'a'));
  ASSERT_TRUE(cache_->Put(a, "bundle").ok());
  // A cubin whose kernel id has the same bytes as the command's store id.
  Artifact cubin;
  cubin.meta.key.kernel_id = ObjectStoreId(a.key.command);
  cubin.meta.key.kind = ArtifactKind::kCubin;
  cubin.meta.key.target = *ParseTarget("sm_89");
  cubin.meta.key.toolkit = "nvrtc-13.0+test";
  cubin.meta.kernel_name = "k";
  cubin.bytes = "cubin bytes";
  ASSERT_TRUE(store_->Put(cubin).ok());

  absl::StatusOr<std::vector<ObjectEntry>> listed = cache_->List(a.key.command);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, a.key);
  absl::StatusOr<std::vector<ObjectEntry>> all = cache_->ListAll();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
  absl::StatusOr<ObjectPage> page = cache_->ListClientMade("");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->entries.size(), 1u);
}

TEST_F(StoreObjectCacheTest, DeleteRemovesOneEntryAndIsOkWhenAbsent) {
  ObjectEntry a = Entry(5, std::string(32, 'a'));
  ObjectEntry b = Entry(5, std::string(32, 'b'));
  ASSERT_TRUE(cache_->Put(a, "bundle a").ok());
  ASSERT_TRUE(cache_->Put(b, "bundle b").ok());
  EXPECT_TRUE(cache_->Delete(a.key).ok());
  EXPECT_TRUE(absl::IsNotFound(cache_->Get(a.key).status()));
  EXPECT_EQ(*cache_->Get(b.key), "bundle b");
  EXPECT_EQ(cache_->List(a.key.command)->size(), 1u);
  EXPECT_TRUE(cache_->Delete(a.key).ok());
}

TEST_F(StoreObjectCacheTest, AnOwningCacheKeepsItsEntriesAcrossReopening) {
  ObjectEntry a = Entry(6, std::string(32, 'a'));
  cache_.reset();
  store_.reset();
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp_ / "store");
    ASSERT_TRUE(store.ok());
    std::unique_ptr<ObjectCache> owning = NewOwningStoreObjectCache(*std::move(store));
    ASSERT_TRUE(owning->Put(a, "kept").ok());
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp_ / "store");
  ASSERT_TRUE(store.ok());
  std::unique_ptr<ObjectCache> reopened = NewOwningStoreObjectCache(*std::move(store));
  EXPECT_EQ(*reopened->Get(a.key), "kept");
}

}  // namespace
}  // namespace kcache::objects
