// engine/objects/object_cache.h: the interface's defaults and the one size check.
#include "engine/objects/object_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kcache::objects {
namespace {

// Only the pure virtual calls, over a map: what the defaults are built on.
class MapCache final : public ObjectCache {
 public:
  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey&) override {
    return std::vector<ObjectEntry>{};
  }
  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    auto found = bundles_.find(key.entry_id);
    if (found == bundles_.end()) return absl::NotFoundError("no such entry");
    return found->second;
  }
  absl::Status Put(const ObjectEntry& entry, std::string bundle) override {
    bundles_[entry.key.entry_id] = std::move(bundle);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override { return std::vector<ObjectEntry>{}; }

 private:
  std::map<std::string, std::string> bundles_;
};

TEST(ObjectCacheTest, GetHeldByDefaultHoldsACopyThatOutlivesTheCache) {
  auto cache = std::make_unique<MapCache>();
  ObjectEntry entry;
  entry.key.entry_id = "a";
  ASSERT_TRUE(cache->Put(entry, "bundle bytes").ok());
  absl::StatusOr<HeldBytes> held = cache->GetHeld(entry.key);
  ASSERT_TRUE(held.ok());
  cache.reset();
  EXPECT_EQ(held->bytes, "bundle bytes");
  EXPECT_NE(held->owner, nullptr);
}

TEST(ObjectCacheTest, GetHeldPassesGetsErrorOn) {
  MapCache cache;
  ObjectEntryKey absent;
  absent.entry_id = "absent";
  EXPECT_TRUE(absl::IsNotFound(cache.GetHeld(absent).status()));
}

TEST(ObjectCacheTest, DeleteAndPagingAreUnimplementedUnlessACacheCanDoThem) {
  MapCache cache;
  EXPECT_TRUE(absl::IsUnimplemented(cache.Delete(ObjectEntryKey{})));
  EXPECT_TRUE(absl::IsUnimplemented(cache.ListClientMade("").status()));
  cache.RecordUse(ObjectEntryKey{});  // does nothing where no store has a bound
}

TEST(ObjectCacheTest, TheSizeCheckAllowsTheBoundAndNamesBothNumbersPastIt) {
  EXPECT_TRUE(CheckObjectBytes(0, 0).ok());
  EXPECT_TRUE(CheckObjectBytes(64, 64).ok());
  absl::Status over = CheckObjectBytes(65, 64);
  EXPECT_TRUE(absl::IsResourceExhausted(over));
  EXPECT_EQ(over.message(), "an object of 65 bytes is over --object-max-bytes 64");
  EXPECT_TRUE(CheckObjectBytes(kDefaultMaxObjectBytes, kDefaultMaxObjectBytes).ok());
  EXPECT_FALSE(CheckObjectBytes(kDefaultMaxObjectBytes + 1, kDefaultMaxObjectBytes).ok());
}

}  // namespace
}  // namespace kcache::objects
