// The Redis door's commands over a real store: replies byte for byte, in RESP2 and RESP3,
// namespaces, bounds, and what each one counts.
#include "daemon/service/redis_commands.h"

#include <gtest/gtest.h>

#include <map>

#include "daemon/objects/tiered_object_cache.h"
#include "engine/objects/named_object.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using testing::TempDir;

class RedisCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(tmp_ / "store");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    objects_ = objects::NewTieredObjectCache(store_.get(), {}, 1 << 20);
    RedisCommandOptions options;
    options.max_value_bytes = 100;
    options.max_key_bytes = 64;
    options.version = "9.9.9";
    commands_ = std::make_unique<RedisCommands>(
        objects_.get(), options, [this](RedisDoorCount count, int64_t n) { counts_[count] += n; });
  }

  std::string Run(std::vector<std::string> args, uint64_t oversized = 0) {
    std::string reply;
    last_ = commands_->Execute(resp::Command{std::move(args), oversized}, session_, &reply,
                               /*room=*/uint64_t{1} << 30);
    return reply;
  }
  // The same with `room` bytes of room for the reply.
  RedisExecuted RunIn(uint64_t room, std::vector<std::string> args, std::string* reply) {
    return commands_->Execute(resp::Command{std::move(args), 0}, session_, reply, room);
  }

  TempDir tmp_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<objects::ObjectCache> objects_;
  std::unique_ptr<RedisCommands> commands_;
  RedisSession session_;
  std::map<RedisDoorCount, int64_t> counts_;
  RedisExecuted last_;
};

TEST_F(RedisCommandsTest, SetGetMultiGetExistsDelete) {
  std::string binary("\0\r\n\xff", 4);
  EXPECT_EQ(Run({"GET", "pt2:a"}), "$-1\r\n");
  EXPECT_EQ(Run({"SET", "pt2:a", binary}), "+OK\r\n");
  EXPECT_EQ(Run({"get", "pt2:a"}), "$4\r\n" + binary + "\r\n");
  EXPECT_EQ(Run({"SET", std::string("triton:\0k", 9), "v", "EX", "60"}), "+OK\r\n");
  EXPECT_EQ(Run({"MGET", "pt2:a", "pt2:none", std::string("triton:\0k", 9)}),
            "*3\r\n$4\r\n" + binary + "\r\n$-1\r\n$1\r\nv\r\n");
  EXPECT_EQ(Run({"EXISTS", "pt2:a", "pt2:none", "pt2:a"}), ":2\r\n");
  EXPECT_EQ(Run({"DEL", "pt2:a", "pt2:none"}), ":1\r\n");
  EXPECT_EQ(Run({"GET", "pt2:a"}), "$-1\r\n");
  EXPECT_EQ(Run({"EXISTS", "pt2:a"}), ":0\r\n");
  EXPECT_EQ(counts_[RedisDoorCount::kHit], 3);
  EXPECT_EQ(counts_[RedisDoorCount::kMiss], 3);
  EXPECT_EQ(counts_[RedisDoorCount::kSet], 2);
  EXPECT_EQ(counts_[RedisDoorCount::kBytesIn], 5);
  EXPECT_EQ(counts_[RedisDoorCount::kBytesOut], 9);
}

TEST_F(RedisCommandsTest, SetHonoursNxAndXxAndRefusesBadOptions) {
  EXPECT_EQ(Run({"SET", "pt2:a", "1", "XX"}), "$-1\r\n");
  EXPECT_EQ(Run({"SET", "pt2:a", "1", "NX", "PX", "5"}), "+OK\r\n");
  EXPECT_EQ(Run({"SET", "pt2:a", "2", "NX"}), "$-1\r\n");
  EXPECT_EQ(Run({"SET", "pt2:a", "3", "XX", "KEEPTTL"}), "+OK\r\n");
  EXPECT_EQ(Run({"GET", "pt2:a"}), "$1\r\n3\r\n");
  EXPECT_EQ(Run({"SET", "pt2:a", "4", "NX", "XX"}).substr(0, 17), "-ERR syntax error");
  EXPECT_EQ(Run({"SET", "pt2:a", "4", "EX"}).substr(0, 17), "-ERR syntax error");
  EXPECT_EQ(Run({"SET", "pt2:a", "4", "EX", "-1"}).substr(0, 17), "-ERR syntax error");
  EXPECT_EQ(Run({"SET", "pt2:a", "4", "GET"}).substr(0, 17), "-ERR syntax error");
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedCommand], 4);
  EXPECT_EQ(Run({"GET", "pt2:a"}), "$1\r\n3\r\n");
}

TEST_F(RedisCommandsTest, RefusesKeysOutsideTheNamespaces) {
  for (std::string key : {"other:a", "pt2", "pt2x:a", ":a", "triton"}) {
    std::string reply = Run({"SET", key, "v"});
    EXPECT_EQ(reply.substr(0, 12), "-ERR key '" + key.substr(0, 2)) << reply;
    EXPECT_NE(reply.find("--redis-namespaces"), std::string::npos) << reply;
  }
  EXPECT_EQ(Run({"MGET", "pt2:a", "no:b"}).substr(0, 4), "-ERR");
  EXPECT_EQ(Run({"GET", "nope"}).substr(0, 4), "-ERR");
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedNamespace], 7);
}

TEST_F(RedisCommandsTest, RefusesValuesOverTheBoundAndKeysOverTheirs) {
  std::string reply = Run({"SET", "pt2:big", ""}, /*oversized=*/101);
  EXPECT_NE(reply.find("101 bytes is over kcached's --redis-value-max-bytes 100"),
            std::string::npos)
      << reply;
  EXPECT_EQ(Run({"EXISTS", "pt2:big"}), ":0\r\n");
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedValueTooBig], 1);
  const std::string long_key = "pt2:" + std::string(61, 'k');  // 65 bytes, over 64
  for (std::vector<std::string> command : {std::vector<std::string>{"SET", long_key, "v"},
                                           {"GET", long_key},
                                           {"MGET", "pt2:a", long_key},
                                           {"EXISTS", long_key},
                                           {"DEL", long_key}}) {
    reply = Run(command);
    EXPECT_NE(reply.find("65 bytes is over kcached's --redis-key-max-bytes 64"), std::string::npos)
        << command[0] << ": " << reply;
  }
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedKeyTooBig], 5);
  EXPECT_EQ(Run({"SET", long_key.substr(0, 64), "v"}), "+OK\r\n");
}

// A reply larger than the room the door gives is neither appended nor counted: the door waits
// for its client to read, or refuses it (redis_door_server.cc). Replies up to 64 KiB always fit.
TEST_F(RedisCommandsTest, RepliesOverTheRoomAreLeftUnansweredAndUncounted) {
  const std::string value(40 << 10, 'v');
  for (const char* key : {"pt2:1", "pt2:2", "pt2:3"})
    ASSERT_EQ(Run({"SET", key, value}), "+OK\r\n");
  std::string reply = "earlier";
  RedisExecuted done = RunIn(100 << 10, {"MGET", "pt2:1", "pt2:2", "pt2:3"}, &reply);
  EXPECT_FALSE(done.answered);
  EXPECT_GT(done.needed, uint64_t{100} << 10);
  EXPECT_EQ(reply, "earlier") << "nothing appended";
  done = RunIn(100 << 10, {"MGET", "pt2:1", "pt2:2"}, &reply);
  EXPECT_TRUE(done.answered);
  EXPECT_EQ(reply.size(), 7 + 4 + 2 * (value.size() + 10));  // "earlier", *2, two bulks
  reply.clear();
  done = RunIn(1, {"GET", "pt2:1"}, &reply);  // 40 KiB: under the 64 KiB every reply has
  EXPECT_TRUE(done.answered);
  const std::string big(200 << 10, 'b');
  ASSERT_EQ(Run({"SET", "pt2:big", big}), "+OK\r\n");
  reply.clear();
  done = RunIn(100 << 10, {"GET", "pt2:big"}, &reply);
  EXPECT_FALSE(done.answered);
  EXPECT_EQ(done.needed, big.size() + 11);
  done = RunIn(100 << 10, {"ECHO", big}, &reply);
  EXPECT_FALSE(done.answered);
  EXPECT_EQ(reply, "");
  EXPECT_EQ(counts_[RedisDoorCount::kHit], 3) << "the two answered MGET keys and the GET";
  EXPECT_EQ(counts_[RedisDoorCount::kBytesOut], 3 * static_cast<int64_t>(value.size()));
}

// DEL answers what it deleted: a baked store's entry is served, never deleted, so DEL of one
// answers 0 and it stays.
TEST_F(RedisCommandsTest, DeleteOfABakedKeyAnswersZero) {
  TempDir baked_dir;
  {
    absl::StatusOr<std::unique_ptr<Store>> baked = OpenStore(baked_dir / "store");
    ASSERT_TRUE(baked.ok());
    std::unique_ptr<objects::ObjectCache> writer =
        objects::NewTieredObjectCache(baked->get(), {}, 1 << 20);
    ASSERT_TRUE(objects::PutNamedObject(*writer, "pt2:baked", "from the image").ok());
  }
  StoreOptions read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> baked = OpenStore(baked_dir / "store", read_only);
  ASSERT_TRUE(baked.ok()) << baked.status();
  objects_ = objects::NewTieredObjectCache(store_.get(), {baked->get()}, 1 << 20);
  commands_ = std::make_unique<RedisCommands>(objects_.get(), RedisCommandOptions{},
                                              [](RedisDoorCount, int64_t) {});
  EXPECT_EQ(Run({"SET", "pt2:mine", "v"}), "+OK\r\n");
  EXPECT_EQ(Run({"DEL", "pt2:baked"}), ":0\r\n");
  EXPECT_EQ(Run({"GET", "pt2:baked"}), "$14\r\nfrom the image\r\n");
  EXPECT_EQ(Run({"DEL", "pt2:baked", "pt2:mine", "pt2:none"}), ":1\r\n");
  EXPECT_EQ(Run({"EXISTS", "pt2:baked", "pt2:mine"}), ":1\r\n");
}

TEST_F(RedisCommandsTest, HandshakeInBothProtocols) {
  session_.id = 42;
  EXPECT_EQ(Run({"PING"}), "+PONG\r\n");
  EXPECT_EQ(Run({"PING", "hi"}), "$2\r\nhi\r\n");
  EXPECT_EQ(Run({"CLIENT", "SETINFO", "LIB-NAME", "redis-py"}), "+OK\r\n");
  EXPECT_EQ(Run({"CLIENT", "SETNAME", "worker"}), "+OK\r\n");
  EXPECT_EQ(Run({"CLIENT", "MAINT_NOTIFICATIONS", "ON", "moving-endpoint-type", "internal-ip"}),
            "+OK\r\n");  // redis-py 8's handshake
  EXPECT_EQ(Run({"CLIENT", "ID"}), ":42\r\n");
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedCommand], 0);  // a client's handshake is all served
  EXPECT_EQ(Run({"SELECT", "0"}), "+OK\r\n");
  EXPECT_NE(Run({"SELECT", "1"}).find("database 0 only"), std::string::npos);
  EXPECT_EQ(Run({"COMMAND", "DOCS"}), "*0\r\n");
  EXPECT_NE(Run({"INFO"}).find("kcache_version:9.9.9"), std::string::npos);
  const std::string fields =
      "$6\r\nserver\r\n$6\r\nkcache\r\n$7\r\nversion\r\n$5\r\n9.9.9\r\n$5\r\nproto\r\n:3\r\n"
      "$2\r\nid\r\n:42\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
      "$7\r\nmodules\r\n*0\r\n";
  EXPECT_EQ(Run({"HELLO", "3", "SETNAME", "w"}), "%7\r\n" + fields);
  EXPECT_EQ(session_.protocol, 3);
  EXPECT_EQ(Run({"GET", "pt2:none"}), "_\r\n");
  std::string resp2 = Run({"HELLO", "2"});
  EXPECT_EQ(resp2.substr(0, 5), "*14\r\n");
  EXPECT_EQ(session_.protocol, 2);
  EXPECT_EQ(Run({"HELLO", "4"}).substr(0, 8), "-NOPROTO");
  EXPECT_NE(Run({"HELLO", "3", "AUTH", "u", "p"}).find("no users"), std::string::npos);
  EXPECT_EQ(session_.protocol, 2);
  EXPECT_EQ(Run({"QUIT"}), "+OK\r\n");
  EXPECT_TRUE(session_.quit);
}

TEST_F(RedisCommandsTest, RefusesUnknownCommandsAndWrongArity) {
  EXPECT_EQ(Run({"GET"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(Run({"GET", "pt2:a", "pt2:b"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(Run({"SET", "pt2:a"}), "-ERR wrong number of arguments for 'set' command\r\n");
  EXPECT_EQ(Run({"PING", "a", "b"}), "-ERR wrong number of arguments for 'ping' command\r\n");
  std::string reply = Run({"FLUSHALL"});
  EXPECT_EQ(reply.substr(0, 32), "-ERR unknown command 'FLUSHALL':");
  EXPECT_NE(Run({"CLIENT", "KILL", "x"}).find("not served"), std::string::npos);
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedCommand], 6);
}

TEST_F(RedisCommandsTest, DriverTakesOneVersionAndNamesWhatToSendOtherwise) {
  EXPECT_EQ(Run({"KCACHE.DRIVER", "12090"}), "+OK\r\n");
  EXPECT_EQ(session_.driver, 12090u);
  EXPECT_EQ(Run({"kcache.driver", "13000"}), "+OK\r\n");
  EXPECT_EQ(session_.driver, 13000u);
  for (const char* bad : {"", "0", "999", "100000", "-13000", "13.0", "13000x", "abc"}) {
    std::string reply = Run({"KCACHE.DRIVER", bad});
    EXPECT_EQ(reply.rfind("-ERR KCACHE.DRIVER '", 0), 0u) << bad << ": " << reply;
    EXPECT_NE(reply.find("cuDriverGetVersion"), std::string::npos) << reply;
  }
  EXPECT_NE(Run({"KCACHE.DRIVER"}).find("takes one argument, not 0"), std::string::npos);
  EXPECT_NE(Run({"KCACHE.DRIVER", "1", "2"}).find("takes one argument, not 2"), std::string::npos);
  EXPECT_EQ(session_.driver, 13000u) << "a refused KCACHE.DRIVER keeps the version told";
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedCommand], 10);
}

TEST_F(RedisCommandsTest, ACubinWithoutAToolkitIsAMissOnceTheDriverIsTold) {
  // A CUDA ELF header and nothing else: a cubin that names no toolkit (real cubins:
  // tests/integration/redis_door_test.cc).
  std::string header(64, '\0');
  header.replace(0, 4,
                 "\x7f"
                 "ELF");
  header[4] = 2;     // ELFCLASS64
  header[5] = 1;     // little-endian
  header[18] = 190;  // EM_CUDA
  ASSERT_EQ(Run({"SET", "triton:k:k.cubin", header}), "+OK\r\n");
  ASSERT_EQ(Run({"SET", "triton:k:k.json", "{}"}), "+OK\r\n");
  const std::string served = "*2\r\n$64\r\n" + header + "\r\n$2\r\n{}\r\n";
  EXPECT_EQ(Run({"MGET", "triton:k:k.cubin", "triton:k:k.json"}), served) << "not told: served";
  EXPECT_EQ(Run({"KCACHE.DRIVER", "13000"}), "+OK\r\n");
  EXPECT_EQ(Run({"GET", "triton:k:k.cubin"}), "$-1\r\n");
  EXPECT_EQ(Run({"MGET", "triton:k:k.cubin", "triton:k:k.json"}), "*2\r\n$-1\r\n$2\r\n{}\r\n");
  EXPECT_EQ(Run({"EXISTS", "triton:k:k.cubin"}), ":1\r\n") << "stored all along";
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedToolkitUnknown], 2);
  EXPECT_EQ(counts_[RedisDoorCount::kRefusedDriverTooOld], 0);
  EXPECT_EQ(counts_[RedisDoorCount::kMiss], 2);
  EXPECT_EQ(counts_[RedisDoorCount::kHit], 3);
}

TEST(NamedObjectTest, KeysDifferByEveryByteOfTheNameAndFromLauncherKeys) {
  EXPECT_NE(NamedValueKey("pt2:a"), NamedValueKey("pt2:b"));
  EXPECT_NE(NamedValueKey(std::string("pt2:\0", 5)), NamedValueKey("pt2:"));
  EXPECT_EQ(NamedValueKey("pt2:a"), NamedValueKey("pt2:a"));
}

}  // namespace
}  // namespace kcache
