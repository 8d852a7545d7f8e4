// The memory tier on its own: hits share the stored artifact, the byte bound holds, least
// recently used entries go first, and invalidation drops a kernel's entries.
#include "daemon/cache/memory_lru.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kcache {
namespace {

KernelId IdOf(const std::string& source) {
  KernelSpec spec;
  spec.source = source;
  return ComputeKernelId(spec);
}

Answer EntryOf(size_t bytes, char fill = 'x') {
  auto artifact = std::make_shared<Artifact>();
  artifact->bytes.assign(bytes, fill);
  return Answer{artifact, ServeRule::kExactSass, "test"};
}

TEST(MemoryLruTest, HitSharesTheStoredArtifactWithoutCopying) {
  MemoryLru lru(1 << 20);
  MemoryKey key{IdOf("a"), {8, 9}, 13000};
  Answer entry = EntryOf(1000);
  ASSERT_TRUE(lru.Insert(key, entry));
  std::optional<Answer> hit = lru.Lookup(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->artifact.get(), entry.artifact.get());  // the same object, not a copy
  EXPECT_EQ(hit->rule, ServeRule::kExactSass);
  EXPECT_EQ(hit->reason, "test");
}

TEST(MemoryLruTest, KeyIncludesDeviceSmAndDriver) {
  MemoryLru lru(1 << 20);
  KernelId id = IdOf("a");
  ASSERT_TRUE(lru.Insert(MemoryKey{id, {8, 9}, 13000}, EntryOf(10)));
  EXPECT_TRUE(lru.Lookup(MemoryKey{id, {8, 9}, 13000}).has_value());
  EXPECT_FALSE(lru.Lookup(MemoryKey{id, {8, 6}, 13000}).has_value());
  EXPECT_FALSE(lru.Lookup(MemoryKey{id, {8, 9}, 12080}).has_value());
  EXPECT_FALSE(lru.Lookup(MemoryKey{IdOf("b"), {8, 9}, 13000}).has_value());
}

TEST(MemoryLruTest, StaysWithinTheByteBoundEvictingLeastRecentlyUsed) {
  MemoryLru lru(3000);
  MemoryKey a{IdOf("a"), {8, 9}, 0}, b{IdOf("b"), {8, 9}, 0}, c{IdOf("c"), {8, 9}, 0},
      d{IdOf("d"), {8, 9}, 0};
  ASSERT_TRUE(lru.Insert(a, EntryOf(1000)));
  ASSERT_TRUE(lru.Insert(b, EntryOf(1000)));
  ASSERT_TRUE(lru.Insert(c, EntryOf(1000)));
  EXPECT_EQ(lru.Stats().bytes, 3000u);
  ASSERT_TRUE(lru.Lookup(a).has_value());  // a is now the most recent; b the least
  ASSERT_TRUE(lru.Insert(d, EntryOf(1000)));
  EXPECT_FALSE(lru.Lookup(b).has_value());
  EXPECT_TRUE(lru.Lookup(a).has_value());
  EXPECT_TRUE(lru.Lookup(c).has_value());
  EXPECT_TRUE(lru.Lookup(d).has_value());
  MemoryLruStats stats = lru.Stats();
  EXPECT_EQ(stats.bytes, 3000u);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_EQ(stats.evictions, 1u);

  ASSERT_TRUE(lru.Insert(b, EntryOf(2500)));  // needs room for 2500: evicts until it fits
  EXPECT_LE(lru.Stats().bytes, 3000u);
  EXPECT_TRUE(lru.Lookup(b).has_value());
}

TEST(MemoryLruTest, ArtifactLargerThanTheBoundIsNotKept) {
  MemoryLru lru(100);
  MemoryKey a{IdOf("a"), {8, 9}, 0};
  EXPECT_FALSE(lru.Insert(a, EntryOf(101)));
  EXPECT_FALSE(lru.Lookup(a).has_value());
  EXPECT_EQ(lru.Stats().bytes, 0u);
  MemoryLru none(0);  // a zero bound keeps nothing
  EXPECT_FALSE(none.Insert(a, EntryOf(1)));
}

TEST(MemoryLruTest, ReplacingAKeyKeepsTheByteCountExact) {
  MemoryLru lru(10000);
  MemoryKey a{IdOf("a"), {8, 9}, 0};
  ASSERT_TRUE(lru.Insert(a, EntryOf(1000, 'x')));
  ASSERT_TRUE(lru.Insert(a, EntryOf(400, 'y')));
  EXPECT_EQ(lru.Stats().bytes, 400u);
  EXPECT_EQ(lru.Stats().entries, 1u);
  EXPECT_EQ(lru.Lookup(a)->artifact->bytes, std::string(400, 'y'));
}

TEST(MemoryLruTest, InvalidateKernelDropsOnlyThatKernelsEntries) {
  MemoryLru lru(1 << 20);
  KernelId a = IdOf("a"), b = IdOf("b");
  ASSERT_TRUE(lru.Insert(MemoryKey{a, {8, 6}, 0}, EntryOf(10)));
  ASSERT_TRUE(lru.Insert(MemoryKey{a, {8, 9}, 0}, EntryOf(10)));
  ASSERT_TRUE(lru.Insert(MemoryKey{b, {8, 9}, 0}, EntryOf(10)));
  lru.InvalidateKernel(a);
  EXPECT_FALSE(lru.Lookup(MemoryKey{a, {8, 6}, 0}).has_value());
  EXPECT_FALSE(lru.Lookup(MemoryKey{a, {8, 9}, 0}).has_value());
  EXPECT_TRUE(lru.Lookup(MemoryKey{b, {8, 9}, 0}).has_value());
  EXPECT_EQ(lru.Stats().invalidations, 2u);
  EXPECT_EQ(lru.Stats().bytes, 10u);
}

TEST(MemoryLruTest, InsertIfCurrentRefusesAfterAnInvalidation) {
  MemoryLru lru(1 << 20);
  MemoryKey a{IdOf("a"), {8, 9}, 0};
  uint64_t epoch = lru.epoch();
  lru.InvalidateKernel(IdOf("a"));  // the stores changed while a reader was looking
  EXPECT_FALSE(lru.InsertIfCurrent(a, EntryOf(10), epoch));
  EXPECT_FALSE(lru.Lookup(a).has_value());
  EXPECT_TRUE(lru.InsertIfCurrent(a, EntryOf(10), lru.epoch()));
  EXPECT_TRUE(lru.Lookup(a).has_value());
}

}  // namespace
}  // namespace kcache
