// `kcache export`: copies the entries clients put into kcached (the compiler launchers' objects
// and the Redis door's values; ObjectCache::ListClientMade) into a store directory that the next
// image bakes (docs/torch-compile.md, "Into the next image"). Each entry is checked before it
// is written: its bundle decodes, a launcher entry's id is its manifest's digest, a named
// value holds its own name.
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_EXPORT_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_EXPORT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/objects/object_cache.h"
#include "engine/store/store.h"

namespace kcache::objects {

// The namespace of the launchers' entries; a named value's is its name's text before the
// first ':' ("pt2", "triton").
inline constexpr char kLauncherNamespace[] = "objects";
std::string NamespaceOf(const ObjectEntry& entry);

struct ExportOptions {
  std::vector<std::string> namespaces;  // only these; empty: every one
};

struct ExportProgress {
  uint64_t listed = 0;                           // entries seen
  uint64_t exported = 0;                         // written to the store
  uint64_t bytes = 0;                            // their bundle bytes
  uint64_t other_namespace = 0;                  // not asked for
  uint64_t gone = 0;                             // listed, then not found (evicted, deleted)
  uint64_t refused = 0;                          // did not verify: not written
  std::map<std::string, uint64_t> by_namespace;  // exported, by namespace
};

// Copies every page of `from`'s client-made entries into `to`, calling `progress` after each
// entry. Errors: those of listing (Unimplemented: `from` cannot list them) and of writing `to`
// (e.g. ResourceExhausted on a full disk); DataLoss when `from` pages out of order.
absl::StatusOr<ExportProgress> ExportObjects(
    ObjectCache& from, Store& to, const ExportOptions& options,
    const std::function<void(const ExportProgress&)>& progress);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_EXPORT_H_
