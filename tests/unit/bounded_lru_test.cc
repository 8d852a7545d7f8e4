// The one byte-bounded LRU with an invalidation epoch (core/bounded_lru.h), on its own: the
// bound holds, the least recently used go first, a value over the bound is not kept, and an
// insert read before an invalidation is refused. Its adapters are tested in memory_lru_test
// and memo_object_cache_test.
#include "core/bounded_lru.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kcache {
namespace {

using Lru = BoundedLru<std::string, std::string>;

TEST(BoundedLruTest, StaysWithinTheByteBoundEvictingLeastRecentlyUsed) {
  Lru lru(3000);
  ASSERT_TRUE(lru.Insert("a", "A", 1000));
  ASSERT_TRUE(lru.Insert("b", "B", 1000));
  ASSERT_TRUE(lru.Insert("c", "C", 1000));
  EXPECT_EQ(lru.Stats().bytes, 3000u);
  ASSERT_EQ(lru.Find("a"), "A");  // a is now the most recent; b the least
  ASSERT_TRUE(lru.Insert("d", "D", 1000));
  EXPECT_FALSE(lru.Find("b").has_value());
  EXPECT_EQ(lru.Find("a"), "A");
  EXPECT_EQ(lru.Find("c"), "C");
  EXPECT_EQ(lru.Find("d"), "D");
  BoundedLruStats stats = lru.Stats();
  EXPECT_EQ(stats.bytes, 3000u);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_EQ(stats.evictions, 1u);

  // Room for 2500 evicts the three least recent (a, c, then d: Find made them a, c, d in turn).
  ASSERT_TRUE(lru.Insert("b", "B2", 2500));
  EXPECT_EQ(lru.Stats().bytes, 2500u);
  EXPECT_EQ(lru.Stats().evictions, 4u);
  EXPECT_EQ(lru.Find("b"), "B2");
  EXPECT_FALSE(lru.Find("d").has_value());
}

TEST(BoundedLruTest, AValueLargerThanTheBoundIsNotKeptAndDropsTheKeysOldValue) {
  Lru lru(100);
  ASSERT_TRUE(lru.Insert("a", "small", 10));
  EXPECT_FALSE(lru.Insert("a", "large", 101));
  EXPECT_FALSE(lru.Find("a").has_value());  // never the old value for a newer one refused
  EXPECT_EQ(lru.Stats().bytes, 0u);
  EXPECT_EQ(lru.Stats().entries, 0u);
  Lru none(0);  // a zero bound keeps nothing
  EXPECT_FALSE(none.Insert("a", "x", 1));
}

TEST(BoundedLruTest, ReplacingAKeyKeepsTheByteCountExact) {
  Lru lru(10000);
  ASSERT_TRUE(lru.Insert("a", "x", 1000));
  ASSERT_TRUE(lru.Insert("a", "y", 400));
  EXPECT_EQ(lru.Stats().bytes, 400u);
  EXPECT_EQ(lru.Stats().entries, 1u);
  EXPECT_EQ(lru.Find("a"), "y");
  EXPECT_EQ(lru.Stats().evictions, 0u);
}

TEST(BoundedLruTest, InsertIfCurrentRefusesAfterAnyInvalidation) {
  Lru lru(1 << 20);
  uint64_t epoch = lru.epoch();
  lru.Invalidate({"unrelated"});  // the slower tier changed while a reader was looking
  EXPECT_NE(lru.epoch(), epoch);
  EXPECT_FALSE(lru.InsertIfCurrent("a", "stale", 10, epoch));
  EXPECT_FALSE(lru.Find("a").has_value());
  EXPECT_TRUE(lru.InsertIfCurrent("a", "fresh", 10, lru.epoch()));
  EXPECT_EQ(lru.Find("a"), "fresh");

  epoch = lru.epoch();
  lru.InvalidateIf([](const std::string&) { return false; });  // dropped nothing: still new
  EXPECT_FALSE(lru.InsertIfCurrent("b", "stale", 10, epoch));
}

TEST(BoundedLruTest, InvalidateDropsTheNamedKeysAndInvalidateIfTheMatchingOnes) {
  Lru lru(1 << 20);
  for (const char* key : {"L1", "G1", "L2", "G2"}) ASSERT_TRUE(lru.Insert(key, key, 10));
  lru.Invalidate({"L1", "G1", "absent"});
  EXPECT_FALSE(lru.Find("L1").has_value());
  EXPECT_FALSE(lru.Find("G1").has_value());
  EXPECT_EQ(lru.Stats().invalidations, 2u);  // only what was held counts
  lru.InvalidateIf([](const std::string& key) { return key[0] == 'L'; });
  EXPECT_FALSE(lru.Find("L2").has_value());
  EXPECT_EQ(lru.Find("G2"), "G2");
  BoundedLruStats stats = lru.Stats();
  EXPECT_EQ(stats.invalidations, 3u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, 10u);
  EXPECT_EQ(stats.evictions, 0u);
}

// Readers, writers and invalidations from several threads leave the byte count the sum of what
// is held and within the bound (run under TSan by scripts/sanitize.sh).
TEST(BoundedLruTest, ConcurrentUseKeepsTheBoundAndTheCount) {
  Lru lru(5000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&lru, t] {
      for (int i = 0; i < 2000; ++i) {
        std::string key = std::to_string((i * 7 + t) % 64);
        switch (i % 4) {
          case 0:
            lru.InsertIfCurrent(key, key, 100 + i % 300, lru.epoch());
            break;
          case 1:
            lru.Find(key);
            break;
          case 2:
            lru.Insert(key, key, 50);
            break;
          default:
            if (i % 40 == 3) lru.Invalidate({key});
            break;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  BoundedLruStats stats = lru.Stats();
  EXPECT_LE(stats.bytes, 5000u);
  uint64_t held = 0;
  for (int k = 0; k < 64; ++k) {
    if (std::optional<std::string> value = lru.Find(std::to_string(k))) ++held;
  }
  EXPECT_EQ(held, stats.entries);
  EXPECT_GT(stats.evictions, 0u);
}

}  // namespace
}  // namespace kcache
