// Where a launcher's outputs live: the ObjectCache interface, over a store
// (store_object_cache.h), kcached's tiers (memo_, tiered_, fleet_object_cache.h) or kcached
// itself (client/cli/object_remote.h, client/launch/fast_object_cache.h). Entries are
// core/object_entry.h's; their payload is a bundle (object_bundle.h).
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_CACHE_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/object_entry.h"
#include "engine/objects/object_page.h"

namespace kcache::objects {

// Bytes, valid while `owner` lives.
struct HeldBytes {
  absl::string_view bytes;
  std::shared_ptr<const void> owner;
};

// The largest bundle stored, unless set otherwise: kcached's --object-max-bytes, the
// launchers' KCACHE_MAX_OBJECT_BYTES.
inline constexpr uint64_t kDefaultMaxObjectBytes = uint64_t{256} << 20;
// OK when a bundle of `bytes` may be stored under the bound `max_bytes` (--object-max-bytes,
// KCACHE_MAX_OBJECT_BYTES); ResourceExhausted naming both numbers when it is larger.
absl::Status CheckObjectBytes(uint64_t bytes, uint64_t max_bytes);

// Every failure is a value: the launcher then compiles uncached.
//
// Thread safety is each implementation's, stated where it is made. kcached's are thread-safe:
// over a store (store_object_cache.h: the store is), its baked and writable stores
// (tiered_object_cache.h), its memory (memo_object_cache.h) and the fleet tier
// (fleet_object_cache.h), each over thread-safe ones; the gRPC object service, the fast path
// and the Redis door share one such cache and call it from their threads at once, with no lock
// of their own. A client's, over kcached's gRPC service (client/cli/object_remote.h) or its
// fast path (client/launch/fast_object_cache.h), belongs to one command and is not
// thread-safe: the launcher and `kcache export` call it from one thread.
class ObjectCache {
 public:
  virtual ~ObjectCache() = default;
  // Entries under key1 (metadata only). Empty when none.
  virtual absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) = 0;
  // One entry's bundle bytes, checksum verified. NotFound when absent or corrupt.
  virtual absl::StatusOr<std::string> Get(const ObjectEntryKey& key) = 0;
  // The same bytes, held where they are when the cache can (kcache-launch: in kcached's
  // fast-path arena, leased until the owner goes) rather than copied; Get's, owned, otherwise.
  virtual absl::StatusOr<HeldBytes> GetHeld(const ObjectEntryKey& key);
  // Stores `bundle` under `entry`. Taken by value: a caller that has no more use for the bytes
  // moves them in, and kcached's caches hand them on down to the store, which frees them once
  // encoded (Store::PutOwned), so an upload is not copied on its way.
  virtual absl::Status Put(const ObjectEntry& entry, std::string bundle) = 0;
  // Every entry (metadata only): `kcache explain` looks for the same source among them.
  virtual absl::StatusOr<std::vector<ObjectEntry>> ListAll() = 0;
  // Notes that the entry under `key` was just served from a tier above this cache (kcached's
  // memory, its fast path's arena), so that the writable store's LRU bound sees it as
  // recently used (Store::RecordUse: cheap, batched). Does nothing where no store has a bound.
  virtual void RecordUse(const ObjectEntryKey& key) {}
  // Deletes one entry (OK when absent). Unimplemented where the cache cannot delete.
  virtual absl::Status Delete(const ObjectEntryKey& key) {
    return absl::UnimplementedError("this object cache cannot delete entries");
  }
  // A page of the entries clients put (PageOfEntries over kcached's writable store; every
  // entry of a store directory), for `kcache export`. Unimplemented where the cache cannot.
  virtual absl::StatusOr<ObjectPage> ListClientMade(const std::string& after) {
    return absl::UnimplementedError("this object cache cannot list client-made entries");
  }
};

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_CACHE_H_
