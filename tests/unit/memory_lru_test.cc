// The kernel answers' memory tier on its own: hits share the stored artifact, an answer counts
// its artifact's bytes, and invalidation drops a kernel's entries (on every device) and refuses
// an insert read before it. The LRU under it: bounded_lru_test.
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

// An answer stands for its artifact's payload bytes (the bound itself: bounded_lru_test).
TEST(MemoryLruTest, AnAnswerCountsItsArtifactsBytesAndOneWithoutIsNotKept) {
  MemoryLru lru(1000);
  MemoryKey a{IdOf("a"), {8, 9}, 0}, b{IdOf("b"), {8, 9}, 0};
  ASSERT_TRUE(lru.Insert(a, EntryOf(600)));
  EXPECT_EQ(lru.Stats().bytes, 600u);
  EXPECT_FALSE(lru.Insert(b, EntryOf(1001)));
  ASSERT_TRUE(lru.Insert(b, EntryOf(600)));  // 1200 > 1000: a goes
  EXPECT_FALSE(lru.Lookup(a).has_value());
  EXPECT_EQ(lru.Stats().evictions, 1u);
  EXPECT_FALSE(lru.Insert(a, Answer{nullptr, ServeRule::kExactSass, "none"}));
  EXPECT_FALSE(lru.Lookup(a).has_value());
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
