// ObjectEntry <-> its wire form (proto/kcache/v1/objects.proto), for both sides of the
// ObjectCache service: kcached (daemon/service) and the launchers' client (client/cli).
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_WIRE_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_WIRE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/objects/object_cache.h"
#include "kcache/v1/objects.pb.h"

namespace kcache::objects {

// The largest piece of a bundle per stream message, and the most entries, manifest lines and
// bytes of text an entry may carry on the wire (a hostile one is refused, not allocated).
inline constexpr size_t kObjectChunkBytes = 1 << 20;
inline constexpr int kMaxWireManifestLines = 1 << 16;
inline constexpr size_t kMaxWireEntryBytes = 16 << 20;

void ToWire(const ObjectEntry& entry, v1::ObjectEntry* wire);
// InvalidArgument naming the field when the entry is malformed (a bad key1 or entry id, more
// lines than the bounds above). Takes the message whole: its strings are moved, not copied
// (a launcher's listing holds ~5 400 manifest lines); pass std::move of one no longer needed.
absl::StatusOr<ObjectEntry> FromWire(v1::ObjectEntry wire);

// An entry and its bundle handed from one process to another (kcache's NVRTC stand-in to `kcache
// nvrtc-put`): the v1.ObjectEntry framed (PutFramed), then the bundle to the end.
std::string EncodeHandedEntry(const ObjectEntry& entry, absl::string_view bundle);
// InvalidArgument when the bytes are not one, the entry is malformed (FromWire), or its id is not
// its manifest's. The entry's size is the bundle's.
absl::StatusOr<std::pair<ObjectEntry, std::string>> DecodeHandedEntry(absl::string_view bytes);

// Entries and their bundles handed back the other way (`kcache nvrtc-get`, a store's entries for
// the stand-in of a process with no kcached to ask): each EncodeHandedEntry, framed. nvrtc-get
// is asked about at most kMaxNvrtcGetKeys command keys and answers at most kMaxNvrtcGetEntries
// entries a key, kMaxNvrtcGetAnswer bytes in all.
inline constexpr size_t kMaxNvrtcGetKeys = 4;
inline constexpr size_t kMaxNvrtcGetEntries = 8;
inline constexpr size_t kMaxNvrtcGetAnswer = size_t{64} << 20;
void AppendHandedEntry(std::string& out, const ObjectEntry& entry, absl::string_view bundle);
// InvalidArgument, as DecodeHandedEntry, when any of them is not one.
absl::StatusOr<std::vector<std::pair<ObjectEntry, std::string>>> DecodeHandedEntries(
    absl::string_view bytes);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_WIRE_H_
