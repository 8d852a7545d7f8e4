// Redis Cluster key slots against the values Redis itself gives (CLUSTER KEYSLOT, and the
// cluster specification's CRC16 check value), and the shared tier's URL forms.
#include "engine/shared/redis_slot.h"

#include <gtest/gtest.h>

#include "engine/shared/redis_cluster.h"

namespace kcache {
namespace {

TEST(RedisCrc16, MatchesTheClusterSpecificationCheckValue) {
  EXPECT_EQ(RedisCrc16("123456789"), 0x31C3);
  EXPECT_EQ(RedisCrc16(""), 0);
}

TEST(RedisKeySlot, MatchesClusterKeyslot) {
  // redis-cli CLUSTER KEYSLOT on redis-server 7.0.15.
  EXPECT_EQ(RedisKeySlot("foo"), 12182);
  EXPECT_EQ(RedisKeySlot("bar"), 5061);
  EXPECT_EQ(RedisKeySlot("hello"), 866);
  EXPECT_EQ(RedisKeySlot(""), 0);
}

TEST(RedisKeySlot, HashesOnlyTheHashTag) {
  EXPECT_EQ(RedisKeySlot("{user1000}.following"), RedisKeySlot("user1000"));
  EXPECT_EQ(RedisKeySlot("{user1000}.followers"), RedisKeySlot("user1000"));
  EXPECT_EQ(RedisKeySlot("foo{bar}{zap}"), RedisKeySlot("bar"));  // the first tag only
  EXPECT_EQ(RedisKeySlot("foo{{bar}}zap"), RedisKeySlot("{bar"));
}

TEST(RedisKeySlot, HashesTheWholeKeyWithoutAClosedNonEmptyTag) {
  EXPECT_EQ(RedisKeySlot("foo{}{bar}"), RedisCrc16("foo{}{bar}") & 16383);
  EXPECT_EQ(RedisKeySlot("foo{bar"), RedisCrc16("foo{bar") & 16383);
  EXPECT_EQ(RedisKeySlot("}foo{"), RedisCrc16("}foo{") & 16383);
}

TEST(ParseRedisUrl, SingleRedis) {
  absl::StatusOr<RedisEndpoints> endpoints = ParseRedisUrl("redis://10.0.0.5:6380");
  ASSERT_TRUE(endpoints.ok()) << endpoints.status();
  EXPECT_FALSE(endpoints->cluster);
  ASSERT_EQ(endpoints->seeds.size(), 1u);
  EXPECT_EQ(endpoints->seeds[0].ToString(), "10.0.0.5:6380");
  EXPECT_EQ(ParseRedisUrl("redis://cache")->seeds[0].port, 6379);
}

TEST(ParseRedisUrl, ClusterSeeds) {
  absl::StatusOr<RedisEndpoints> endpoints =
      ParseRedisUrl("redis-cluster://10.0.0.5:6379,10.0.0.6:7000");
  ASSERT_TRUE(endpoints.ok()) << endpoints.status();
  EXPECT_TRUE(endpoints->cluster);
  ASSERT_EQ(endpoints->seeds.size(), 2u);
  EXPECT_EQ(endpoints->seeds[1].ToString(), "10.0.0.6:7000");
}

TEST(ParseRedisUrl, RefusesWhatItCannotUse) {
  for (const char* url : {"http://x:1", "redis://", "redis://a:1,b:2", "redis://a:0",
                          "redis://a:99999", "redis-cluster://a:b", "redis-cluster://"}) {
    EXPECT_EQ(ParseRedisUrl(url).status().code(), absl::StatusCode::kInvalidArgument) << url;
  }
}

}  // namespace
}  // namespace kcache
