// How an object entry (core/object_entry.h) is laid out in the store's schema (an Artifact of
// kind kObject, engine/store/store.h; docs/store-format.md, "Object entries"): the one place
// that reads or writes an object's ArtifactKey and ArtifactMeta fields.
//
//   key    {kernel_id = the command key's 32 bytes, kind kObject, no target (""),
//           toolkit = the entry id, driver 0}
//   meta   kernel_name   = the entry's source
//          lowered_names = its header manifest, line for line
//          compile_log   = its key fields, one "name\tvalue\n" line each, both C-escaped
//          put_by        = who put it
//          size, checksum, created/last-used times as every artifact's
//   bytes  the bundle (object_bundle.h)
// Existing stores, baked stores and the fleet tier's frames hold exactly these bytes: a change
// here is a change of the stored format.
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_SCHEMA_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_SCHEMA_H_

#include <string>
#include <vector>

#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "core/object_entry.h"

namespace kcache::objects {

// The store key of the entry named `key`.
ArtifactKey ObjectStoreKey(const ObjectEntryKey& key);
// The id the store lists a command key's entries under (Store::ListArtifacts).
KernelId ObjectStoreId(const CommandKey& command);

// Whether `meta` is an object entry's (kind kObject) rather than a kernel's artifact.
bool IsObjectArtifact(const ArtifactMeta& meta);
// The entry `meta` stores. Precondition: IsObjectArtifact(meta). A key field line that does
// not unescape into a name and a value is skipped.
ObjectEntry ObjectEntryFromArtifact(const ArtifactMeta& meta);
// The object entries among `metas`, in their order; kernels' artifacts are left out.
std::vector<ObjectEntry> ObjectEntriesOf(const std::vector<ArtifactMeta>& metas);
// The artifact that stores `entry` with `bundle_bytes` as its payload, created now (checksum
// and size are the store's to set).
Artifact ArtifactFromObjectEntry(const ObjectEntry& entry, std::string bundle_bytes);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_SCHEMA_H_
