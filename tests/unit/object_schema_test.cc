// engine/objects/object_schema.h: an entry maps to exactly the store key and metadata it always
// has (known answers: a stored entry stays readable), and back.
#include "engine/objects/object_schema.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "absl/strings/escaping.h"

namespace kcache::objects {
namespace {

ObjectEntry Known() {
  std::array<uint8_t, CommandKey::kSize> bytes;
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  ObjectEntry entry;
  entry.manifest = {{"@cwd@/a.h", "0123456789abcdef0123456789abcdef"}, {"$CPATH", "(unset)"}};
  entry.key = ObjectEntryKey::Of(CommandKey(bytes), entry.manifest);
  entry.source = "@cwd@/a.cu";
  entry.fields = {{"arg", "-O3"}, {"arg", "-DX=\"a\tb\nc\""}, {"tool nvcc", "ff00"}};
  entry.size = 7;
  return entry;
}

// The store key's bytes: kernel id = key1 | kind 4 | no target | u8 64 + entry id | driver 0.
TEST(ObjectSchemaTest, StoreKeyKnownAnswer) {
  ArtifactKey key = ObjectStoreKey(Known().key);
  EXPECT_EQ(absl::BytesToHexString(key.Encode()),
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
            "04"
            "00"
            "40"
            "6362633438663964666433353365363333653466656633333166636165663363"
            "3462656435636464356238656430353230333937663537343938653961656362"
            "00000000");
  EXPECT_EQ(key.ToString(), "000102030405/object/cbc48f9dfd35");
  EXPECT_EQ(ObjectStoreId(Known().key.command), key.kernel_id);
}

TEST(ObjectSchemaTest, MetaKnownAnswer) {
  Artifact artifact = ArtifactFromObjectEntry(Known(), "bundle!");
  EXPECT_EQ(artifact.meta.key.kind, ArtifactKind::kObject);
  EXPECT_EQ(artifact.meta.key.toolkit,
            "cbc48f9dfd353e633e4fef331fcaef3c4bed5cdd5b8ed0520397f57498e9aecb");
  EXPECT_EQ(artifact.meta.kernel_name, "@cwd@/a.cu");
  EXPECT_EQ(artifact.meta.lowered_names, Known().manifest);
  EXPECT_EQ(artifact.meta.compile_log,
            "arg\t-O3\n"
            "arg\t-DX=\\\"a\\tb\\nc\\\"\n"
            "tool nvcc\tff00\n");
  EXPECT_GT(artifact.meta.created_unix_ms, 0);
  EXPECT_EQ(artifact.bytes, "bundle!");
}

TEST(ObjectSchemaTest, RoundTripsAndTellsObjectsFromKernels) {
  Artifact artifact = ArtifactFromObjectEntry(Known(), "bundle!");
  artifact.meta.size = 7;
  ASSERT_TRUE(IsObjectArtifact(artifact.meta));
  ObjectEntry back = ObjectEntryFromArtifact(artifact.meta);
  EXPECT_EQ(back.key, Known().key);
  EXPECT_EQ(back.source, Known().source);
  EXPECT_EQ(back.manifest, Known().manifest);
  EXPECT_EQ(back.fields, Known().fields);
  EXPECT_EQ(back.size, 7u);

  ArtifactMeta kernel;
  kernel.key.kind = ArtifactKind::kCubin;
  EXPECT_FALSE(IsObjectArtifact(kernel));
  std::vector<ObjectEntry> entries = ObjectEntriesOf({kernel, artifact.meta});
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].key, Known().key);
}

TEST(ObjectSchemaTest, AKeyFieldLineThatDoesNotUnescapeIsSkipped) {
  ArtifactMeta meta = ArtifactFromObjectEntry(Known(), "").meta;
  meta.compile_log = "arg\t-O3\nno tab here\nbad\t\\x\n";
  ObjectEntry entry = ObjectEntryFromArtifact(meta);
  ASSERT_EQ(entry.fields.size(), 1u);
  EXPECT_EQ(entry.fields[0], KeyField("arg", "-O3"));
}

}  // namespace
}  // namespace kcache::objects
