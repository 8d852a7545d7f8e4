// The object cache over a store (engine/store/store.h): each entry an artifact of kind kObject
// (object_schema.h), so objects share the store's checksums, LRU bound, listings and read-only
// baked stores. kcached's writable and baked stores, and `kcache` over a store directory.
#ifndef KCACHE_ENGINE_OBJECTS_STORE_OBJECT_CACHE_H_
#define KCACHE_ENGINE_OBJECTS_STORE_OBJECT_CACHE_H_

#include <memory>

#include "engine/objects/object_cache.h"
#include "engine/store/store.h"

namespace kcache::objects {

// Over a store; `store` is borrowed and must outlive the cache. Thread-safe (Store is).
// ListClientMade pages every entry of the store.
std::unique_ptr<ObjectCache> NewStoreObjectCache(Store* store);
// The same, owning the store (closed with the cache).
std::unique_ptr<ObjectCache> NewOwningStoreObjectCache(std::unique_ptr<Store> store);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_STORE_OBJECT_CACHE_H_
