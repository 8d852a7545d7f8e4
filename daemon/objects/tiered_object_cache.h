// The object cache kcached serves: its writable store and its read-only baked stores. Lookup
// asks the baked stores first (trusted: made at image build) and then the writable one;
// entries a client puts (client-made) go to the writable store only, never over an entry a
// baked store holds (and to the shared fleet tier only through fleet_object_cache.h, when
// kcached opts in).
#ifndef KCACHE_DAEMON_OBJECTS_TIERED_OBJECT_CACHE_H_
#define KCACHE_DAEMON_OBJECTS_TIERED_OBJECT_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/objects/object_cache.h"
#include "engine/store/store.h"

namespace kcache::objects {

// Thread-safe (the stores are). `local` and `baked` are borrowed and must outlive the cache.
// Put refuses a bundle over `max_object_bytes` (ResourceExhausted) and one whose key a baked
// store holds (AlreadyExists). A store that fails is skipped: a miss, not an error. Delete
// deletes from the writable store only; ListClientMade lists the writable store's entries.
std::unique_ptr<ObjectCache> NewTieredObjectCache(Store* local, std::vector<Store*> baked,
                                                  uint64_t max_object_bytes);

}  // namespace kcache::objects

#endif  // KCACHE_DAEMON_OBJECTS_TIERED_OBJECT_CACHE_H_
