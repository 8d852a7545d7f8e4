// The shared tier's signed frame: what seals opens, under the key or its rotation partner;
// anything written without the key, flipped, truncated or moved under another artifact's key
// does not.
#include "engine/shared/shared_entry.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/testutil/store_artifacts.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::TestArtifact;

const std::string kOldKey(32, 'o');
const std::string kNewKey = "0123456789abcdef0123456789abcdef-new";

SharedKeys Keys(const std::string& primary, std::optional<std::string> secondary = {}) {
  return *SharedKeys::FromBytes(primary, std::move(secondary));
}

TEST(SharedEntry, SealedEntryOpensToTheSameArtifact) {
  Artifact artifact = TestArtifact(1, 5000);
  std::string frame = SealSharedEntry(Keys(kOldKey), artifact);
  EXPECT_EQ(frame.substr(0, 4), "KCSE");
  absl::StatusOr<Artifact> opened = OpenSharedEntry(Keys(kOldKey), artifact.meta.key, frame);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->bytes, artifact.bytes);
  EXPECT_EQ(opened->meta.key, artifact.meta.key);
  EXPECT_EQ(opened->meta.kernel_name, artifact.meta.kernel_name);
  EXPECT_EQ(opened->meta.checksum, PayloadChecksum(artifact.bytes));
}

TEST(SharedEntry, EveryFlippedByteIsRejected) {
  Artifact artifact = TestArtifact(2, 300);
  std::string frame = SealSharedEntry(Keys(kOldKey), artifact);
  for (size_t i = 0; i < frame.size(); ++i) {
    std::string bad = frame;
    bad[i] ^= 0x01;
    EXPECT_EQ(OpenSharedEntry(Keys(kOldKey), artifact.meta.key, bad).status().code(),
              absl::StatusCode::kDataLoss)
        << "byte " << i;
  }
}

TEST(SharedEntry, EveryTruncationAndPaddingIsRejected) {
  Artifact artifact = TestArtifact(3, 300);
  std::string frame = SealSharedEntry(Keys(kOldKey), artifact);
  for (size_t length = 0; length < frame.size(); ++length) {
    EXPECT_EQ(
        OpenSharedEntry(Keys(kOldKey), artifact.meta.key, frame.substr(0, length)).status().code(),
        absl::StatusCode::kDataLoss)
        << length;
  }
  EXPECT_FALSE(OpenSharedEntry(Keys(kOldKey), artifact.meta.key, frame + "x").ok());
}

TEST(SharedEntry, AnEntrySealedWithoutTheKeyIsRejected) {
  Artifact artifact = TestArtifact(4, 300);
  std::string forged = SealSharedEntry(Keys(std::string(32, 'x')), artifact);
  absl::Status status = OpenSharedEntry(Keys(kOldKey), artifact.meta.key, forged).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("does not hold"), std::string::npos) << status;
  // The right key id with another key's MAC: the MAC check catches it.
  std::string good = SealSharedEntry(Keys(kOldKey), artifact);
  std::string spliced = good.substr(0, 13) + forged.substr(13);
  EXPECT_EQ(OpenSharedEntry(Keys(kOldKey), artifact.meta.key, spliced).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(SharedEntry, AnEntryCopiedUnderAnotherArtifactsKeyIsRejected) {
  Artifact a = TestArtifact(5, 300);
  Artifact b = TestArtifact(6, 300);
  std::string frame = SealSharedEntry(Keys(kOldKey), a);
  absl::Status status = OpenSharedEntry(Keys(kOldKey), b.meta.key, frame).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
}

TEST(SharedEntry, DuringARotationBothKeysOpen) {
  Artifact artifact = TestArtifact(7, 300);
  std::string sealed_old = SealSharedEntry(Keys(kOldKey), artifact);
  std::string sealed_new = SealSharedEntry(Keys(kNewKey, kOldKey), artifact);
  // A daemon moved to the new key still reads what the old one wrote, and the other way.
  EXPECT_TRUE(OpenSharedEntry(Keys(kNewKey, kOldKey), artifact.meta.key, sealed_old).ok());
  EXPECT_TRUE(OpenSharedEntry(Keys(kOldKey, kNewKey), artifact.meta.key, sealed_new).ok());
  // Once the old key is dropped, its entries no longer open.
  EXPECT_FALSE(OpenSharedEntry(Keys(kNewKey), artifact.meta.key, sealed_old).ok());
  EXPECT_EQ(SharedKeyId(kOldKey).size(), 8u);
  EXPECT_NE(SharedKeyId(kOldKey), SharedKeyId(kNewKey));
}

TEST(SharedEntry, RedisKeysShareOneHashTag) {
  Artifact artifact = TestArtifact(8, 10);
  std::string entry = SharedEntryRedisKey(artifact.meta.key);
  std::string lease = SharedLeaseRedisKey(artifact.meta.key);
  EXPECT_EQ(entry.substr(0, entry.find('}')), lease.substr(0, lease.find('}')));
  EXPECT_NE(entry, lease);
  EXPECT_EQ(entry.rfind("kcache:v1:{", 0), 0u);
}

TEST(SharedKeys, LoadsKeyFilesAndRefusesShortOrMissingOnes) {
  kcache::testing::TempDir dir;
  std::string good = dir.Write("shared.key", kNewKey + "\n");
  std::string old = dir.Write("old.key", kOldKey);
  absl::StatusOr<SharedKeys> keys = SharedKeys::Load(good, old);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->primary(), kNewKey);  // the trailing newline is not part of the key
  EXPECT_EQ(*keys->secondary(), kOldKey);
  EXPECT_FALSE(SharedKeys::Load(good)->secondary().has_value());
  EXPECT_EQ(SharedKeys::Load(dir.Write("short.key", "too short")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedKeys::Load(dir / "absent.key").status().code(), absl::StatusCode::kNotFound);
}

bool Mentions(const absl::Status& status, absl::string_view text) {
  return absl::string_view(status.message()).find(text) != absl::string_view::npos;
}

TEST(SharedKeys, RawKeyFilesAreRefusedWhateverTheirLastByte) {
  kcache::testing::TempDir dir;
  // 32 random bytes end in a whitespace byte about 2% of the time; 33 bytes are 33. Either way
  // the file is not text, so it is refused rather than silently shortened or cut.
  std::string raw_space(31, '\x9c');
  raw_space.push_back('\n');
  std::string raw_33(33, '\x01');
  for (const std::string& raw : {raw_space, raw_33, std::string(40, '\xff')}) {
    std::string path = dir.Write("raw.key", raw);
    absl::Status status = SharedKeys::Load(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Mentions(status, path)) << status;
    EXPECT_TRUE(Mentions(status, "not text")) << status;
    EXPECT_TRUE(Mentions(status, "base64")) << status;
  }
}

TEST(SharedKeys, AnErrorNamesOnlyTheFileThatWasWrong) {
  kcache::testing::TempDir dir;
  std::string good = dir.Write("shared.key", kNewKey);
  std::string short_key = dir.Write("short.key", "too short");
  absl::Status second_bad = SharedKeys::Load(good, short_key).status();
  EXPECT_TRUE(Mentions(second_bad, short_key)) << second_bad;
  EXPECT_FALSE(Mentions(second_bad, good)) << second_bad;
  absl::Status first_bad = SharedKeys::Load(short_key).status();
  EXPECT_TRUE(Mentions(first_bad, short_key)) << first_bad;
  EXPECT_FALSE(Mentions(first_bad, " or ")) << first_bad;
}

TEST(SharedKeyFromText, KeepsTheTextAndDropsOnlyTrailingWhitespace) {
  EXPECT_EQ(*SharedKeyFromText(kNewKey + " \r\n"), kNewKey);
  EXPECT_EQ(*SharedKeyFromText("  " + kNewKey), "  " + kNewKey);   // leading spaces are text
  EXPECT_FALSE(SharedKeyFromText(kNewKey + "\t" + kNewKey).ok());  // a tab inside is not
  EXPECT_FALSE(SharedKeyFromText(std::string(kSharedKeyMinBytes - 1, 'a')).ok());
  EXPECT_TRUE(SharedKeyFromText(std::string(kSharedKeyMinBytes, 'a')).ok());
}

}  // namespace
}  // namespace kcache
