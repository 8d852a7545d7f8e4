// engine/objects/object_page.h: pages of entries in their store keys' order, bounded by bytes.
#include "engine/objects/object_page.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "engine/objects/object_schema.h"

namespace kcache::objects {
namespace {

ObjectEntry Entry(uint8_t command_byte) {
  std::array<uint8_t, CommandKey::kSize> bytes{};
  bytes[0] = command_byte;
  ObjectEntry entry;
  entry.manifest = {{"@cwd@/a.h", std::string(64, 'a')}};
  entry.key = ObjectEntryKey::Of(CommandKey(bytes), entry.manifest);
  entry.source = "@cwd@/a.cu";
  return entry;
}

std::string KeyOf(const ObjectEntry& entry) { return ObjectStoreKey(entry.key).Encode(); }

std::vector<ObjectEntry> Shuffled(int count) {
  std::vector<ObjectEntry> entries;
  for (int i = 0; i < count; ++i) entries.push_back(Entry(static_cast<uint8_t>(10 + i)));
  std::shuffle(entries.begin(), entries.end(), std::mt19937(7));
  return entries;
}

TEST(ObjectPageTest, ABoundSmallerThanOneEntryGivesOneEntryAPageEachAfterTheLast) {
  std::vector<ObjectEntry> entries = Shuffled(30);
  std::vector<std::string> keys;
  std::string after;
  for (int page = 0; page < 100; ++page) {
    ObjectPage got = PageOfEntries(entries, after, 1);
    ASSERT_EQ(got.entries.size(), 1u);
    keys.push_back(KeyOf(got.entries[0]));
    after = got.next_after;
    if (after.empty()) break;
    EXPECT_EQ(after, keys.back());
  }
  ASSERT_EQ(keys.size(), 30u);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::unique(keys.begin(), keys.end()), keys.end());
}

TEST(ObjectPageTest, ALargeBoundGivesEveryEntryInKeyOrderOnOnePage) {
  ObjectPage page = PageOfEntries(Shuffled(30), "", kObjectPageBytes);
  ASSERT_EQ(page.entries.size(), 30u);
  EXPECT_TRUE(page.next_after.empty());
  EXPECT_TRUE(std::is_sorted(
      page.entries.begin(), page.entries.end(),
      [](const ObjectEntry& a, const ObjectEntry& b) { return KeyOf(a) < KeyOf(b); }));
}

TEST(ObjectPageTest, AfterTheLastKeyThePageIsEmptyAndLast) {
  std::vector<ObjectEntry> entries = Shuffled(5);
  std::string last;
  for (const ObjectEntry& entry : entries) last = std::max(last, KeyOf(entry));
  ObjectPage page = PageOfEntries(entries, last, kObjectPageBytes);
  EXPECT_TRUE(page.entries.empty());
  EXPECT_TRUE(page.next_after.empty());
  EXPECT_TRUE(PageOfEntries({}, "", kObjectPageBytes).entries.empty());
}

}  // namespace
}  // namespace kcache::objects
