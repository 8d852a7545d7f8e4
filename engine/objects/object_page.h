// Paging the entries clients put (ObjectCache::ListClientMade, `kcache export`): pages in the
// order of the entries' store keys, bounded by their metadata's bytes.
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_PAGE_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_PAGE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "core/object_entry.h"

namespace kcache::objects {

// One page of the entries clients put.
struct ObjectPage {
  std::vector<ObjectEntry> entries;
  std::string next_after;  // pass as `after` for the next page; empty: this was the last
};
// The page of `entries` (any order) whose encoded store keys (object_schema.h) sort after
// `after`, in key order, up to about `max_bytes` of metadata (at least one entry).
ObjectPage PageOfEntries(std::vector<ObjectEntry> entries, const std::string& after,
                         size_t max_bytes);
inline constexpr size_t kObjectPageBytes = size_t{1} << 20;

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_PAGE_H_
