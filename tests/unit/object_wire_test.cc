// engine/objects/object_wire.h, an entry handed from one process to another (kcache's NVRTC
// stand-in to `kcache nvrtc-put`): it decodes to what was encoded, its size the bundle's; bytes
// cut short, an entry that does not parse and an entry whose id is not its manifest's are refused.
#include "engine/objects/object_wire.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace kcache::objects {
namespace {

ObjectEntry SomeEntry() {
  std::array<uint8_t, CommandKey::kSize> bytes{};
  bytes[0] = 7;
  ObjectEntry entry;
  entry.manifest = {{"/inc/hdr.h", "0123456789abcdef0123456789abcdef"},
                    {"$NVRTC_APPEND_FLAGS", "(unset)"}};
  entry.key = ObjectEntryKey::Of(CommandKey(bytes), entry.manifest);
  entry.source = "fill.cu";
  entry.fields = {{"arg", "-arch=sm_89"}};
  return entry;
}

TEST(HandedEntryTest, DecodesWhatWasEncoded) {
  std::string bundle("bundle\0bytes", 12);
  absl::StatusOr<std::pair<ObjectEntry, std::string>> decoded =
      DecodeHandedEntry(EncodeHandedEntry(SomeEntry(), bundle));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->first.key, SomeEntry().key);
  EXPECT_EQ(decoded->first.manifest, SomeEntry().manifest);
  EXPECT_EQ(decoded->first.source, "fill.cu");
  EXPECT_EQ(decoded->first.fields, SomeEntry().fields);
  EXPECT_EQ(decoded->first.size, bundle.size());
  EXPECT_EQ(decoded->second, bundle);
}

TEST(HandedEntryTest, BadBytesAreRefused) {
  std::string bytes = EncodeHandedEntry(SomeEntry(), "bundle");
  for (size_t length : {size_t{0}, size_t{7}, size_t{8}, size_t{20}}) {
    EXPECT_FALSE(DecodeHandedEntry(bytes.substr(0, length)).ok()) << length;
  }
  std::string garbage = bytes;
  for (size_t i = 8; i < 24; ++i) garbage[i] = '\xff';
  EXPECT_FALSE(DecodeHandedEntry(garbage).ok());
  ObjectEntry lying = SomeEntry();
  lying.manifest.emplace_back("/inc/other.h", "absent");  // the id is the first manifest's
  absl::StatusOr<std::pair<ObjectEntry, std::string>> decoded =
      DecodeHandedEntry(EncodeHandedEntry(lying, "bundle"));
  EXPECT_FALSE(decoded.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(decoded.status())) << decoded.status();
}

}  // namespace
}  // namespace kcache::objects
