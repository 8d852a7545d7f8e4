// engine/objects/named_object.h: a client's name and value as an object entry, over a real
// store.
#include "engine/objects/named_object.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/objects/object_bundle.h"
#include "engine/objects/store_object_cache.h"
#include "engine/store/store.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

class NamedObjectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp_ / "store");
    ASSERT_TRUE(store.ok()) << store.status();
    cache_ = NewOwningStoreObjectCache(*std::move(store));
  }

  testing::TempDir tmp_;
  std::unique_ptr<ObjectCache> cache_;
};

TEST_F(NamedObjectTest, AValueIsReadBackUnderItsNameAndReplacedByTheNextPut) {
  EXPECT_FALSE(HoldsNamedObject(*cache_, "pt2:a"));
  EXPECT_TRUE(absl::IsNotFound(GetNamedObject(*cache_, "pt2:a").status()));
  ASSERT_TRUE(PutNamedObject(*cache_, "pt2:a", "first").ok());
  EXPECT_TRUE(HoldsNamedObject(*cache_, "pt2:a"));
  EXPECT_EQ(*GetNamedObject(*cache_, "pt2:a"), "first");
  ASSERT_TRUE(PutNamedObject(*cache_, "pt2:a", "second").ok());
  EXPECT_EQ(*GetNamedObject(*cache_, "pt2:a"), "second");
  EXPECT_EQ(cache_->List(NamedValueKey("pt2:a").command)->size(), 1u) << "replaced, not added";
}

TEST_F(NamedObjectTest, NamesThatDifferInAnyByteAreDifferentValues) {
  std::string with_nul("pt2:a\0b", 7);
  ASSERT_TRUE(PutNamedObject(*cache_, "pt2:a", "plain").ok());
  ASSERT_TRUE(PutNamedObject(*cache_, with_nul, "with a NUL").ok());
  ASSERT_TRUE(PutNamedObject(*cache_, "", "empty name").ok());
  EXPECT_EQ(*GetNamedObject(*cache_, "pt2:a"), "plain");
  EXPECT_EQ(*GetNamedObject(*cache_, with_nul), "with a NUL");
  EXPECT_EQ(*GetNamedObject(*cache_, ""), "empty name");
  EXPECT_FALSE(HoldsNamedObject(*cache_, "pt2:ab"));
}

TEST_F(NamedObjectTest, AnEntryHoldingAnotherNamesValueIsNotServed) {
  // What a damaged or hostile store could hold: name a's key, name b's bundle.
  ObjectBundle bundle;
  bundle.object = "b's value";
  bundle.deps.targets.emplace_back("pt2:b");
  std::string bytes = EncodeBundle(bundle);
  ObjectEntry entry;
  entry.key = NamedValueKey("pt2:a");
  entry.source = "pt2:a";
  entry.size = bytes.size();
  ASSERT_TRUE(cache_->Put(entry, bytes).ok());
  absl::StatusOr<std::string> got = GetNamedObject(*cache_, "pt2:a");
  EXPECT_TRUE(absl::IsNotFound(got.status())) << got.status();
}

TEST_F(NamedObjectTest, AnEntryThatIsNotABundleIsNotServed) {
  ObjectEntry entry;
  entry.key = NamedValueKey("pt2:a");
  entry.source = "pt2:a";
  entry.size = 5;
  ASSERT_TRUE(cache_->Put(entry, "junk!").ok());
  EXPECT_TRUE(absl::IsNotFound(GetNamedObject(*cache_, "pt2:a").status()));
}

TEST_F(NamedObjectTest, DeleteRemovesTheValueAndIsOkWhenAbsent) {
  ASSERT_TRUE(PutNamedObject(*cache_, "pt2:a", "value").ok());
  ASSERT_TRUE(PutNamedObject(*cache_, "pt2:b", "other").ok());
  EXPECT_TRUE(DeleteNamedObject(*cache_, "pt2:a").ok());
  EXPECT_FALSE(HoldsNamedObject(*cache_, "pt2:a"));
  EXPECT_TRUE(absl::IsNotFound(GetNamedObject(*cache_, "pt2:a").status()));
  EXPECT_EQ(*GetNamedObject(*cache_, "pt2:b"), "other");
  EXPECT_TRUE(DeleteNamedObject(*cache_, "pt2:a").ok());
}

}  // namespace
}  // namespace kcache::objects
