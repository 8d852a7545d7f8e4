// The handed-miss record (client/launch/handed_miss_record.h): what is encoded decodes the
// same for its own command only; damage, truncation, another version, another command and
// hostile lengths are refused, never crash and never give a record.
#include "client/launch/handed_miss_record.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace kcache::launch {
namespace {

objects::HandedMiss Sample() {
  objects::HandedMiss miss;
  miss.compiler_path = "/usr/bin/x86_64-linux-gnu-g++-12";
  miss.tools = {{"host compiler", "/usr/bin/x86_64-linux-gnu-g++-12"}, {"linker", ""}};
  std::array<uint8_t, CommandKey::kSize> key1{};
  for (size_t i = 0; i < key1.size(); ++i) key1[i] = static_cast<uint8_t>(i * 7 + 1);
  miss.key.key1 = CommandKey(key1);
  miss.key.fields = {{"arg", "-O2"}, {"tool host compiler", "abcdef"}, {"source", "0123"}};
  miss.key.source = "@cwd@/answer.cpp";
  miss.looked_up = true;
  miss.listed = {std::string(64, 'a'), std::string(64, 'b')};
  miss.fetch = {{std::string(64, 'b'), 150u << 20}};
  return miss;
}

const std::vector<std::string> kArgv = {"c++", "-c", "answer.cpp", "-o", "answer.o"};
const std::vector<std::string> kEnv = {"PATH=/usr/bin:/bin", "HOME=/home/me", "CPATH="};

Sha256Digest Binding() { return BindCommand(kArgv, "/work/build", kEnv); }

TEST(HandedMissRecordTest, RoundTripsForItsOwnCommand) {
  absl::StatusOr<std::string> bytes = EncodeHandedMiss(Sample(), Binding());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<objects::HandedMiss> back = DecodeHandedMiss(*bytes, Binding());
  ASSERT_TRUE(back.ok()) << back.status();
  objects::HandedMiss want = Sample();
  EXPECT_EQ(back->compiler_path, want.compiler_path);
  ASSERT_EQ(back->tools.size(), 2u);
  EXPECT_EQ(back->tools[0].role, "host compiler");
  EXPECT_EQ(back->tools[1].path, "");
  EXPECT_EQ(back->key.key1, want.key.key1);
  EXPECT_EQ(back->key.fields, want.key.fields);
  EXPECT_EQ(back->key.source, want.key.source);
  EXPECT_TRUE(back->looked_up);
  EXPECT_EQ(back->listed, want.listed);
  ASSERT_EQ(back->fetch.size(), 1u);
  EXPECT_EQ(back->fetch[0].id, want.fetch[0].id);
  EXPECT_EQ(back->fetch[0].size, want.fetch[0].size);
}

TEST(HandedMissRecordTest, AnEmptyLookupRoundTrips) {
  objects::HandedMiss miss = Sample();
  miss.looked_up = false;
  miss.listed.clear();
  miss.fetch.clear();
  absl::StatusOr<objects::HandedMiss> back =
      DecodeHandedMiss(*EncodeHandedMiss(miss, Binding()), Binding());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->looked_up);
  EXPECT_TRUE(back->listed.empty());
}

// The binding covers argv, the working directory and the environment, but not the variables
// the hand-over sets or takes away, nor the environment's order.
TEST(HandedMissRecordTest, BindingIsTheCommandsArgvCwdAndEnvironment) {
  Sha256Digest binding = Binding();
  std::vector<std::string> argv = kArgv;
  argv[2] = "other.cpp";
  EXPECT_NE(BindCommand(argv, "/work/build", kEnv), binding);
  argv = kArgv;
  argv.push_back("-DX");
  EXPECT_NE(BindCommand(argv, "/work/build", kEnv), binding);
  EXPECT_NE(BindCommand({"c++", "-c answer.cpp", "-o", "answer.o"}, "/work/build", kEnv),
            BindCommand({"c++", "-c", "answer.cpp -o", "answer.o"}, "/work/build", kEnv));
  EXPECT_NE(BindCommand(kArgv, "/work/build2", kEnv), binding);
  std::vector<std::string> env = kEnv;
  env[2] = "CPATH=/opt/include";
  EXPECT_NE(BindCommand(kArgv, "/work/build", env), binding);
  env = {kEnv[2],
         kEnv[0],
         kEnv[1],
         "KCACHE_HANDED_MISS=5",
         "KCACHE_TIMEOUT_LEFT=900:1:",
         "KCACHE_INSIDE_COMPILE=1"};
  EXPECT_EQ(BindCommand(kArgv, "/work/build", env), binding);
  env.push_back("KCACHE_HANDED_MISSX=1");  // only the exact names are left out
  EXPECT_NE(BindCommand(kArgv, "/work/build", env), binding);
}

TEST(HandedMissRecordTest, AnotherCommandsRecordIsRefused) {
  std::string bytes = *EncodeHandedMiss(Sample(), Binding());
  absl::StatusOr<objects::HandedMiss> back =
      DecodeHandedMiss(bytes, BindCommand(kArgv, "/elsewhere", kEnv));
  EXPECT_TRUE(absl::IsPermissionDenied(back.status())) << back.status();
}

TEST(HandedMissRecordTest, EveryDamagedByteAndEveryTruncationIsRefused) {
  std::string bytes = *EncodeHandedMiss(Sample(), Binding());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] ^= 0x20;
    EXPECT_FALSE(DecodeHandedMiss(damaged, Binding()).ok()) << "byte " << i;
  }
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(DecodeHandedMiss(bytes.substr(0, size), Binding()).ok()) << "size " << size;
  }
  EXPECT_FALSE(DecodeHandedMiss(bytes + "x", Binding()).ok());
}

// A record whose checksum holds but whose insides lie (a hostile writer): lengths and counts
// past the end or over the bounds, another version, trailing bytes. Refused without a crash
// or a large allocation.
TEST(HandedMissRecordTest, HostileLengthsAreRefused) {
  auto resealed = [](std::string body) {  // body: everything before the checksum
    Sha256Digest sum = Sha256Of(body);
    return body + std::string(reinterpret_cast<const char*>(sum.data()), sum.size());
  };
  std::string good = *EncodeHandedMiss(Sample(), Binding());
  std::string body = good.substr(0, good.size() - 32);
  ASSERT_TRUE(DecodeHandedMiss(resealed(body), Binding()).ok());
  constexpr size_t kPathLength = 4 + 4 + 32;  // where compiler_path's length is
  for (uint32_t length : {0xffffffffu, 0x7fffffffu, static_cast<uint32_t>(body.size()),
                          static_cast<uint32_t>(kMaxHandedMissString + 1)}) {
    std::string hostile = body;
    std::memcpy(hostile.data() + kPathLength, &length, 4);
    EXPECT_FALSE(DecodeHandedMiss(resealed(hostile), Binding()).ok()) << length;
  }
  // The tools' count, after the path.
  size_t count_at = kPathLength + 4 + Sample().compiler_path.size();
  for (uint32_t count : {0xffffffffu, kMaxHandedMissItems + 1, 1000u}) {
    std::string hostile = body;
    std::memcpy(hostile.data() + count_at, &count, 4);
    EXPECT_FALSE(DecodeHandedMiss(resealed(hostile), Binding()).ok()) << count;
  }
  std::string version = body;
  version[4] = 2;
  absl::StatusOr<objects::HandedMiss> other = DecodeHandedMiss(resealed(version), Binding());
  EXPECT_TRUE(absl::IsFailedPrecondition(other.status())) << other.status();
  EXPECT_FALSE(DecodeHandedMiss(resealed(body + "x"), Binding()).ok());
  std::string looked_up = body;  // the flag's byte: 2 is neither
  size_t flag_at = body.size() - 4 - 2 * (4 + 64) - 4 - (4 + 64 + 8) - 1;
  ASSERT_EQ(looked_up[flag_at], 1);
  looked_up[flag_at] = 2;
  EXPECT_FALSE(DecodeHandedMiss(resealed(looked_up), Binding()).ok());
}

TEST(HandedMissRecordTest, RandomBytesNeverDecode) {
  std::mt19937 random(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(random() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    if (i % 2 == 0 && bytes.size() >= 4) bytes.replace(0, 4, "KCHM");
    EXPECT_FALSE(DecodeHandedMiss(bytes, Binding()).ok());
  }
}

TEST(HandedMissRecordTest, ACommandOverTheBoundsIsNotEncoded) {
  objects::HandedMiss miss = Sample();
  miss.key.source = std::string(kMaxHandedMissString + 1, 's');
  EXPECT_FALSE(EncodeHandedMiss(miss, Binding()).ok());
  miss = Sample();
  miss.listed.assign(kMaxHandedMissItems + 1, "id");
  EXPECT_FALSE(EncodeHandedMiss(miss, Binding()).ok());
}

}  // namespace
}  // namespace kcache::launch
