// kcached --share-client-objects: two kcached on a real six-node Redis Cluster. Both opted in:
// a launcher's object and a Redis-door value put through one are served by the other. Either
// not opted in: nothing is shared. A damaged, moved or foreign frame in the tier is a miss,
// counted, never served. Skips without redis-server, redis-cli or c++.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/objects/fleet_object_cache.h"
#include "engine/objects/named_object.h"
#include "engine/objects/object_bundle.h"
#include "engine/objects/object_schema.h"
#include "engine/shared/redis_cluster.h"
#include "engine/shared/shared_entry.h"
#include "tests/testutil/client_objects.h"
#include "tests/testutil/redis_cluster.h"

namespace kcache {
namespace {

using testing::DaemonProcess;
using testing::Outcome;

class ClientObjectSharingTest : public testing::ClientObjectTest {
 protected:
  void SetUp() override {
    ClientObjectTest::SetUp();
    if (IsSkipped()) return;
    StartCluster();
  }

  // The tier as a test reads and writes it.
  std::unique_ptr<RedisCluster> Tier() {
    absl::StatusOr<std::unique_ptr<RedisCluster>> redis = RedisCluster::Create(cluster_.Url());
    EXPECT_TRUE(redis.ok()) << redis.status();
    return redis.ok() ? *std::move(redis) : nullptr;
  }

  // The frame of door value `name` in the tier ("" when absent).
  std::string Frame(const std::string& name) {
    absl::StatusOr<std::optional<std::string>> frame =
        Tier()->Get(objects::FleetObjectRedisKey(NamedValueKey(name)));
    return frame.ok() && frame->has_value() ? **frame : "";
  }

  void PutFrame(const std::string& name, const std::string& frame) {
    ASSERT_TRUE(Tier()->Set(objects::FleetObjectRedisKey(NamedValueKey(name)), frame).ok());
  }

  // Keys of the client-made objects' namespace on every node.
  std::string ObjectKeys() {
    return testing::Run(absl::StrCat("redis-cli --cluster call 127.0.0.1:", cluster_.ports()[0],
                                     " KEYS 'kcache:obj:*'"))
        .output;
  }
};

TEST_F(ClientObjectSharingTest, BothOptedInServeEachOthersLauncherObjectsAndDoorValues) {
  DaemonProcess& a = StartOnCluster(true);
  DaemonProcess& b = StartOnCluster(true);
  ASSERT_EQ(BuildThrough(a, "b1"), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Door(a, "SET pt2:graph fx-graph-bytes"), "OK");
  ASSERT_EQ(WaitCounter(a, "objects.fleet_puts", 2), 2);

  ASSERT_EQ(BuildThrough(b, "b2"), Outcome::kHit) << last_output_ << b.Log();
  EXPECT_EQ(Door(b, "GET pt2:graph"), "fx-graph-bytes");
  EXPECT_EQ(Counter(b, "objects.fleet_hits"), 2);
  EXPECT_EQ(Counter(b, "objects.fleet_refused"), 0);
  // Copied into b's store: served from there next time, without asking the tier.
  ASSERT_EQ(BuildThrough(b, "b3"), Outcome::kHit) << last_output_;
  EXPECT_EQ(Door(b, "GET pt2:graph"), "fx-graph-bytes");
  EXPECT_EQ(Counter(b, "objects.fleet_hits"), 2);
  EXPECT_EQ(Counter(b, "objects.fleet_misses"), 0);
}

TEST_F(ClientObjectSharingTest, APodNotOptedInNeitherWritesNorReads) {
  DaemonProcess& shut = StartOnCluster(false);
  DaemonProcess& open = StartOnCluster(true);
  ASSERT_EQ(BuildThrough(shut, "b1"), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Door(shut, "SET pt2:graph from-shut"), "OK");
  EXPECT_EQ(ObjectKeys().find("kcache:obj:v1:"), std::string::npos) << ObjectKeys();
  ASSERT_EQ(BuildThrough(open, "b2"), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Door(open, "GET pt2:graph"), "");

  // What the opted-in pod put, the other never reads.
  EXPECT_EQ(Door(open, "SET pt2:other from-open"), "OK");
  ASSERT_EQ(WaitCounter(open, "objects.fleet_puts", 2), 2);  // the build's object and the value
  // open's object and value, each an entry and a listing; nothing of shut's (its pt2:graph).
  std::string keys = ObjectKeys();
  size_t count = 0;
  for (size_t at = keys.find("kcache:obj:v1:"); at != std::string::npos;
       at = keys.find("kcache:obj:v1:", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 4u) << keys;
  ASSERT_EQ(BuildThrough(shut, "b3"), Outcome::kHit) << last_output_;  // its own store
  EXPECT_EQ(Door(shut, "GET pt2:other"), "");
  EXPECT_EQ(Counter(shut, "objects.fleet_misses"), 0);
  EXPECT_EQ(Counter(shut, "objects.fleet_hits"), 0);
}

TEST_F(ClientObjectSharingTest, DamagedMovedOrForeignFramesAreMissesNeverServed) {
  DaemonProcess& a = StartOnCluster(true);
  DaemonProcess& b = StartOnCluster(true);
  EXPECT_EQ(Door(a, "SET pt2:one value-of-one"), "OK");
  EXPECT_EQ(Door(a, "SET pt2:two value-of-two"), "OK");
  ASSERT_EQ(WaitCounter(a, "objects.fleet_puts", 2), 2);
  std::string one = Frame("pt2:one");
  ASSERT_FALSE(one.empty());

  std::string flipped = Frame("pt2:two");
  flipped[flipped.size() / 2] ^= 1;
  PutFrame("pt2:two", flipped);
  EXPECT_EQ(Door(b, "GET pt2:two"), "");

  PutFrame("pt2:three", one);  // another name's frame under this name's key
  EXPECT_EQ(Door(b, "GET pt2:three"), "");

  absl::StatusOr<SharedKeys> other =
      SharedKeys::FromBytes("another-fleets-key-of-32-bytes-or-more");
  ASSERT_TRUE(other.ok());
  objects::ObjectBundle bundle;
  bundle.object = "planted";
  bundle.deps.targets = {"pt2:four"};
  ObjectEntry entry;
  entry.key = NamedValueKey("pt2:four");
  entry.source = "pt2:four";
  PutFrame("pt2:four",
           SealSharedEntryAt(*other,
                             objects::ArtifactFromObjectEntry(entry, objects::EncodeBundle(bundle)),
                             objects::FleetObjectRedisKey(entry.key)));
  EXPECT_EQ(Door(b, "GET pt2:four"), "");

  EXPECT_EQ(Counter(b, "objects.fleet_refused"), 3) << b.Log();
  EXPECT_EQ(Counter(b, "objects.fleet_hits"), 0);
  EXPECT_EQ(Door(b, "GET pt2:one"), "value-of-one");  // the intact one still is
}

TEST_F(ClientObjectSharingTest, ADamagedListingOfALauncherObjectIsAMissNeverServed) {
  DaemonProcess& a = StartOnCluster(true);
  DaemonProcess& b = StartOnCluster(true);
  ASSERT_EQ(BuildThrough(a, "b1"), Outcome::kMiss) << last_output_;
  ASSERT_EQ(WaitCounter(a, "objects.fleet_puts", 1), 1);
  std::string keys = ObjectKeys();
  size_t end = keys.find(":list");
  ASSERT_NE(end, std::string::npos) << keys;
  size_t begin = keys.rfind("kcache:obj:v1:", end);
  std::string listing = keys.substr(begin, end + 5 - begin);
  std::unique_ptr<RedisCluster> tier = Tier();
  absl::StatusOr<RedisReply> fields = tier->Command({"HGETALL", listing});
  ASSERT_TRUE(fields.ok() && fields->elements.size() == 2) << listing;
  std::string frame = fields->elements[1].str;
  frame[frame.size() / 2] ^= 1;
  ASSERT_TRUE(tier->Command({"HSET", listing, fields->elements[0].str, frame}).ok());

  ASSERT_EQ(BuildThrough(b, "b2"), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Counter(b, "objects.fleet_refused"), 1) << b.Log();
  EXPECT_EQ(Counter(b, "objects.fleet_hits"), 0);
}

TEST_F(ClientObjectSharingTest, ValuesOverMaxObjectBytesAreRefusedAndHugeOnesNeverRead) {
  DaemonProcess& a = StartOnCluster(true);
  DaemonProcess& b = StartOnCluster(true, {"--object-max-bytes", "2000"});
  std::string file = tmp_.Write("big", std::string(5000, 'v'));
  EXPECT_EQ(Door(a, absl::StrCat("-x SET pt2:big < ", file)), "OK");
  ASSERT_EQ(WaitCounter(a, "objects.fleet_puts", 1), 1);
  EXPECT_EQ(Door(b, "GET pt2:big"), "");  // a valid frame, its value over b's bound

  // Far over the bound (and its metadata's): answered by its size, never sent.
  PutFrame("pt2:huge", std::string((17 << 20) + 4096, 'x'));
  EXPECT_EQ(Door(b, "GET pt2:huge"), "");
  EXPECT_EQ(Counter(b, "objects.fleet_refused"), 2) << b.Log();
  EXPECT_EQ(Counter(b, "objects.fleet_hits"), 0);
  EXPECT_EQ(Counter(b, "objects.fleet_errors"), 0);
}

TEST_F(ClientObjectSharingTest, SharingWithoutASharedTierOrWithABadKeyIsRefusedAtStart) {
  DaemonProcess alone;
  alone.options().extra_flags = {"--no-toolkit", "--share-client-objects"};
  ASSERT_TRUE(alone.Spawn().ok());
  EXPECT_NE(alone.Wait(), 0);
  EXPECT_TRUE(testing::Contains(alone.Log(), "--share-client-objects needs --shared"))
      << alone.Log();

  DaemonProcess bad_key;
  bad_key.options().extra_flags = {"--no-toolkit",
                                   "--shared",
                                   cluster_.Url(),
                                   "--shared-key-file",
                                   tmp_.Write("short.key", "too short"),
                                   "--share-client-objects"};
  ASSERT_TRUE(bad_key.Spawn().ok());
  EXPECT_NE(bad_key.Wait(), 0);
  EXPECT_TRUE(testing::Contains(bad_key.Log(), "short.key")) << bad_key.Log();
}

}  // namespace
}  // namespace kcache
