// An object entry as an Artifact of kind kObject, and back.
#include "engine/objects/object_schema.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kcache::objects {

static_assert(KernelId::kSize == CommandKey::kSize);

KernelId ObjectStoreId(const CommandKey& command) {
  return *KernelId::FromBytes(command.Bytes());  // the same size: never an error
}

ArtifactKey ObjectStoreKey(const ObjectEntryKey& key) {
  ArtifactKey stored;
  stored.kernel_id = ObjectStoreId(key.command);
  stored.kind = ArtifactKind::kObject;
  stored.toolkit = key.entry_id;
  return stored;
}

bool IsObjectArtifact(const ArtifactMeta& meta) { return meta.key.kind == ArtifactKind::kObject; }

ObjectEntry ObjectEntryFromArtifact(const ArtifactMeta& meta) {
  ObjectEntry entry;
  entry.key.command = *CommandKey::FromBytes(meta.key.kernel_id.Bytes());
  entry.key.entry_id = meta.key.toolkit;
  entry.source = meta.kernel_name;
  entry.manifest = meta.lowered_names;
  entry.size = meta.size;
  entry.put_by = meta.put_by;
  for (absl::string_view line : absl::StrSplit(meta.compile_log, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    std::string name, value;
    if (parts.size() == 2 && absl::CUnescape(parts[0], &name) &&
        absl::CUnescape(parts[1], &value)) {
      entry.fields.emplace_back(std::move(name), std::move(value));
    }
  }
  return entry;
}

std::vector<ObjectEntry> ObjectEntriesOf(const std::vector<ArtifactMeta>& metas) {
  std::vector<ObjectEntry> entries;
  for (const ArtifactMeta& meta : metas) {
    if (IsObjectArtifact(meta)) entries.push_back(ObjectEntryFromArtifact(meta));
  }
  return entries;
}

Artifact ArtifactFromObjectEntry(const ObjectEntry& entry, std::string bundle_bytes) {
  Artifact artifact;
  artifact.meta.key = ObjectStoreKey(entry.key);
  artifact.meta.kernel_name = entry.source;
  artifact.meta.lowered_names = entry.manifest;
  for (const KeyField& field : entry.fields) {
    // Fields hold no newlines or tabs of their own except in hostile arguments: escape them.
    absl::StrAppend(&artifact.meta.compile_log, absl::CEscape(field.first), "\t",
                    absl::CEscape(field.second), "\n");
  }
  artifact.meta.put_by = entry.put_by;
  artifact.meta.created_unix_ms = NowUnixMillis();
  artifact.bytes = std::move(bundle_bytes);
  return artifact;
}

}  // namespace kcache::objects
