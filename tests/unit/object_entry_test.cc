// core/object_entry.h: command keys in raw and hex form, entry ids pinned to their framing,
// entry keys and named values' keys.
#include "core/object_entry.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace kcache {
namespace {

CommandKey Counting() {
  std::array<uint8_t, CommandKey::kSize> bytes;
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  return CommandKey(bytes);
}

TEST(CommandKeyTest, RoundTripsThroughBytesAndHex) {
  CommandKey key = Counting();
  EXPECT_EQ(key.Hex(), "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  EXPECT_EQ(key.ShortHex(), "000102030405");
  EXPECT_EQ(*CommandKey::FromBytes(key.Bytes()), key);
  EXPECT_EQ(*CommandKey::FromHex(key.Hex()), key);
  EXPECT_EQ(
      *CommandKey::FromHex("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"),
      key);
  EXPECT_NE(CommandKey(), key);
}

TEST(CommandKeyTest, RefusesTheWrongSizeAndNonHexDigits) {
  EXPECT_FALSE(CommandKey::FromBytes(std::string(31, 'x')).ok());
  EXPECT_FALSE(CommandKey::FromBytes(std::string(33, 'x')).ok());
  EXPECT_FALSE(CommandKey::FromHex(std::string(62, 'a')).ok());
  EXPECT_FALSE(CommandKey::FromHex(std::string(64, 'g')).ok());
  EXPECT_EQ(CommandKey::FromHex("abc").status().code(), absl::StatusCode::kInvalidArgument);
}

// Entry ids are stored: they must never change for the same manifest.
TEST(ManifestIdTest, KnownAnswers) {
  EXPECT_EQ(ManifestId({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  HeaderManifest manifest = {{"@cwd@/a.h", "0123456789abcdef0123456789abcdef"},
                             {"$CPATH", "(unset)"}};
  EXPECT_EQ(ManifestId(manifest),
            "cbc48f9dfd353e633e4fef331fcaef3c4bed5cdd5b8ed0520397f57498e9aecb");
  // Where one field ends is part of the id.
  EXPECT_NE(ManifestId({{"ab", "c"}}), ManifestId({{"a", "bc"}}));
  EXPECT_NE(ManifestId({{"a", "b"}, {"c", "d"}}), ManifestId({{"c", "d"}, {"a", "b"}}));
}

TEST(ObjectEntryKeyTest, IsTheCommandKeyAndTheManifestsId) {
  HeaderManifest manifest = {{"@cwd@/a.h", "0123456789abcdef0123456789abcdef"}};
  ObjectEntryKey key = ObjectEntryKey::Of(Counting(), manifest);
  EXPECT_EQ(key.command, Counting());
  EXPECT_EQ(key.entry_id, ManifestId(manifest));
  EXPECT_EQ(key.ToString(), "000102030405/object/" + key.entry_id.substr(0, 12));
  EXPECT_NE(key, ObjectEntryKey::Of(Counting(), {}));
}

TEST(NamedValueKeyTest, KnownAnswerAndADomainOfItsOwn) {
  ObjectEntryKey key = NamedValueKey("pt2:a");
  EXPECT_EQ(key.command.Hex(), "6b3921be8f7e1fd8d5af0faaf27929ec120972b52f305a21f78f280b9787fcb0");
  EXPECT_EQ(key.entry_id, ManifestId({}));
  EXPECT_NE(NamedValueKey("pt2:b"), key);
  EXPECT_NE(NamedValueKey(std::string("pt2:a\0", 6)), key);
}

}  // namespace
}  // namespace kcache
