// The Redis Cluster client against a real six-node cluster on loopback (three masters, three
// replicas): slots routed as Redis routes them, MOVED after a reshard, ASK during a
// migration, a master killed and its replica promoted with no failed call; and a single
// redis:// server. Skips (125) without redis-server and redis-cli.
#include "engine/shared/redis_cluster.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/shared/redis_slot.h"
#include "tests/testutil/redis_cluster.h"

namespace kcache {
namespace {

using ::kcache::testing::RedisServers;

class RedisClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RedisAvailable()) GTEST_SKIP() << "redis-server or redis-cli missing";
    ASSERT_TRUE(servers_.StartCluster()) << servers_.error();
  }

  std::unique_ptr<RedisCluster> Client(absl::Duration deadline = absl::Seconds(2)) {
    RedisOptions options;
    options.call_deadline = deadline;
    absl::StatusOr<std::unique_ptr<RedisCluster>> client =
        RedisCluster::Create(servers_.Url(), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // A key whose slot is `slot` ("k<n>" for the first n that hashes there).
  static std::string KeyInSlot(int slot) {
    for (int n = 0;; ++n) {
      std::string key = absl::StrCat("k", n);
      if (RedisKeySlot(key) == slot) return key;
    }
  }

  RedisServers servers_;
};

TEST_F(RedisClusterTest, SlotsAgreeWithClusterKeyslot) {
  int port = servers_.ports().front();
  for (const char* key : {"foo", "{user1000}.following", "foo{}{bar}", "kcache:a:b", "x"}) {
    std::string slot(absl::StripAsciiWhitespace(
        servers_.Cli(port, absl::StrCat("cluster keyslot '", key, "'"))));
    EXPECT_EQ(slot, absl::StrCat(RedisKeySlot(key))) << key;
  }
}

TEST_F(RedisClusterTest, MissThenFillThenHitOnEveryMaster) {
  std::unique_ptr<RedisCluster> client = Client();
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 60; ++i) {  // 60 keys land on all three masters
    std::string key = absl::StrCat("artifact:", i);
    absl::StatusOr<std::optional<std::string>> miss = client->Get(key);
    ASSERT_TRUE(miss.ok()) << miss.status();
    EXPECT_FALSE(miss->has_value());
    ASSERT_TRUE(client->Set(key, std::string(1000 + i, 'a' + i % 26)).ok());
    absl::StatusOr<std::optional<std::string>> hit = client->Get(key);
    ASSERT_TRUE(hit.ok() && hit->has_value()) << hit.status();
    EXPECT_EQ(**hit, std::string(1000 + i, 'a' + i % 26));
    // Redis itself holds it on the master the slot map names.
    int master = servers_.MasterOfSlot(RedisKeySlot(key));
    EXPECT_EQ(client->NodeForSlot(RedisKeySlot(key))->port, master);
    EXPECT_EQ(servers_.Cli(master, absl::StrCat("strlen ", key)), absl::StrCat(1000 + i, "\n"));
  }
}

TEST_F(RedisClusterTest, SetIfAbsentTakesALeaseOnce) {
  std::unique_ptr<RedisCluster> client = Client();
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(*client->SetIfAbsent("lease:x", "a", absl::Seconds(30)));
  EXPECT_FALSE(*client->SetIfAbsent("lease:x", "b", absl::Seconds(30)));
  EXPECT_EQ(**client->Get("lease:x"), "a");
  ASSERT_TRUE(client->Delete("lease:x").ok());
  EXPECT_TRUE(*client->SetIfAbsent("lease:x", "c", absl::Seconds(30)));
}

TEST_F(RedisClusterTest, FollowsMovedAfterAReshardAndRereadsTheMap) {
  std::unique_ptr<RedisCluster> client = Client();
  ASSERT_NE(client, nullptr);
  // The first slot of the master serving slot 0 is 0; reshard moves a master's lowest slots.
  std::string key = KeyInSlot(0);
  ASSERT_TRUE(client->Set(key, "before").ok());
  int from = servers_.MasterOfSlot(0);
  int to = servers_.MasterOfSlot(16383);
  ASSERT_NE(from, to);
  uint64_t refreshes = client->map_refreshes();
  testing::RunResult reshard =
      testing::Run(absl::StrCat("redis-cli --cluster reshard 127.0.0.1:", from, " --cluster-from ",
                                servers_.NodeOnPort(from).id, " --cluster-to ",
                                servers_.NodeOnPort(to).id, " --cluster-slots 1 --cluster-yes"));
  ASSERT_EQ(reshard.exit_code, 0) << reshard.output;
  ASSERT_TRUE(servers_.WaitClusterOk());
  ASSERT_EQ(servers_.MasterOfSlot(0), to) << "reshard moved another slot";

  absl::StatusOr<std::optional<std::string>> value = client->Get(key);  // old map: MOVED
  ASSERT_TRUE(value.ok() && value->has_value()) << value.status();
  EXPECT_EQ(**value, "before");
  EXPECT_EQ(client->NodeForSlot(0)->port, to);
  EXPECT_GT(client->map_refreshes(), refreshes);
}

TEST_F(RedisClusterTest, FollowsAskDuringAMigrationWithoutChangingTheMap) {
  std::unique_ptr<RedisCluster> client = Client();
  ASSERT_NE(client, nullptr);
  const int slot = 100;
  std::string staying = KeyInSlot(slot);
  ASSERT_TRUE(client->Set(staying, "on-source").ok());
  int from = servers_.MasterOfSlot(slot);
  int to = servers_.MasterOfSlot(16383);
  ASSERT_NE(from, to);
  std::string from_id = servers_.NodeOnPort(from).id, to_id = servers_.NodeOnPort(to).id;
  ASSERT_TRUE(testing::Contains(
      servers_.Cli(to, absl::StrCat("cluster setslot ", slot, " importing ", from_id)), "OK"));
  ASSERT_TRUE(testing::Contains(
      servers_.Cli(from, absl::StrCat("cluster setslot ", slot, " migrating ", to_id)), "OK"));

  // A key the source does not hold answers ASK: written to and read from the target.
  std::string moving;
  for (int n = 0; moving.empty(); ++n) {
    std::string key = absl::StrCat("m", n);
    if (RedisKeySlot(key) == slot) moving = key;
  }
  absl::StatusOr<std::optional<std::string>> absent = client->Get(moving);
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->has_value());
  ASSERT_TRUE(client->Set(moving, "on-target").ok());
  EXPECT_EQ(**client->Get(moving), "on-target");
  // The source does not hold it: it sends redis-cli on too.
  EXPECT_TRUE(testing::Contains(servers_.Cli(from, absl::StrCat("exists ", moving)),
                                absl::StrCat("ASK ", slot, " 127.0.0.1:", to)));
  EXPECT_EQ(servers_.Cli(to, absl::StrCat("cluster countkeysinslot ", slot)), "1\n");
  // A key the source still holds is served by the source; the map still names the source.
  EXPECT_EQ(**client->Get(staying), "on-source");
  EXPECT_EQ(client->NodeForSlot(slot)->port, from);
}

TEST_F(RedisClusterTest, AMasterKilledLosesNoCallOnceItsReplicaIsPromoted) {
  // A call rides out the failover (node timeout 1 s here) inside its deadline.
  std::unique_ptr<RedisCluster> client = Client(absl::Seconds(30));
  ASSERT_NE(client, nullptr);
  const int kKeys = 90;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(client->Set(absl::StrCat("fo:", i), absl::StrCat("v", i)).ok());
  }
  int victim = servers_.MasterOfSlot(RedisKeySlot("fo:0"));
  // Wait until the victim's replica holds what the victim holds.
  std::string victim_id = servers_.NodeOnPort(victim).id;
  int replica = 0;
  for (const testing::RedisNodeInfo& node : servers_.Nodes()) {
    if (node.master_id == victim_id) replica = node.port;
  }
  ASSERT_NE(replica, 0);
  for (int i = 0; i < 600 && servers_.Cli(replica, "dbsize") != servers_.Cli(victim, "dbsize");
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(servers_.Cli(replica, "dbsize"), servers_.Cli(victim, "dbsize"));

  servers_.Kill(victim);
  int failed = 0;
  for (int i = 0; i < kKeys; ++i) {
    absl::StatusOr<std::optional<std::string>> value = client->Get(absl::StrCat("fo:", i));
    if (!value.ok() || !value->has_value() || **value != absl::StrCat("v", i)) ++failed;
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(client->NodeForSlot(RedisKeySlot("fo:0"))->port, replica);
}

TEST_F(RedisClusterTest, APausedNodeCostsACallItsDeadlineNotAHang) {
  std::unique_ptr<RedisCluster> client = Client(absl::Milliseconds(300));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Set("paused:key", "v").ok());
  int node = servers_.MasterOfSlot(RedisKeySlot("paused:key"));
  servers_.Pause(node);
  absl::StatusOr<std::optional<std::string>> value = client->Get("paused:key");
  EXPECT_FALSE(value.ok());
  servers_.Resume(node);
  // The connection that timed out was closed; the next call opens a fresh one.
  absl::StatusOr<std::optional<std::string>> again = Client()->Get("paused:key");
  ASSERT_TRUE(again.ok() && again->has_value()) << again.status();
}

TEST(RedisSingleTest, OneRedisWithoutCluster) {
  if (!testing::RedisAvailable()) GTEST_SKIP() << "redis-server or redis-cli missing";
  RedisServers server;
  ASSERT_TRUE(server.StartSingle()) << server.error();
  absl::StatusOr<std::unique_ptr<RedisCluster>> client = RedisCluster::Create(server.Url());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_FALSE((*client)->is_cluster());
  EXPECT_FALSE((*client)->Get("a")->has_value());
  ASSERT_TRUE((*client)->Set("a", std::string("\0bin\xff", 5)).ok());
  EXPECT_EQ(**(*client)->Get("a"), std::string("\0bin\xff", 5));
  EXPECT_EQ((*client)->map_refreshes(), 0u);
}

TEST(RedisSingleTest, NothingListeningIsUnavailableNotAHang) {
  // Held for the whole test: a port merely found free could be taken by another test's Redis.
  testing::ClosedPort closed;
  ASSERT_NE(closed.port(), 0);
  RedisOptions options;
  options.call_deadline = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<RedisCluster>> client =
      RedisCluster::Create(absl::StrCat("redis-cluster://127.0.0.1:", closed.port()), options);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::optional<std::string>> value = (*client)->Get("k");
  EXPECT_FALSE(value.ok());
}

}  // namespace
}  // namespace kcache
