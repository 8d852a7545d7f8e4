// Where a launcher's outputs live: the ObjectCache interface (a store directory here; kcached
// over gRPC in client/cli) and the entry and bundle formats both share.
//
// An entry is stored as an Artifact of kind kObject (docs/store-format.md): key
// {key1, kObject, no target, toolkit = entry id}; meta.kernel_name the normalized source,
// meta.lowered_names the manifest (header, digest), meta.compile_log the key1 fields (one
// "name\tvalue" line each, for `kcache explain`); the payload is the bundle below. So
// objects share the store's checksums, LRU bound, listings and read-only baked stores.
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_CACHE_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"
#include "engine/objects/object_key.h"
#include "engine/store/store.h"

namespace kcache::objects {

// What a compile produced, paths normalized (BaseDirs): replayed on a hit.
struct ObjectBundle {
  std::string object;  // the -o file's bytes
  DepFile deps;        // the dependency file, targets and prerequisites
  std::string stdout_text, stderr_text;
  int exit_code = 0;
};
// The same, decoded in place: its views point into the bytes decoded, which must outlive it
// (a hit writes the object straight from kcached's fast-path arena).
struct ObjectBundleView {
  absl::string_view object;
  DepFile deps;
  absl::string_view stdout_text, stderr_text;
  int exit_code = 0;
};
std::string EncodeBundle(const ObjectBundle& bundle);
// DataLoss when the bytes are not a bundle (a damaged or hostile entry).
absl::StatusOr<ObjectBundleView> DecodeBundleView(absl::string_view bytes);
absl::StatusOr<ObjectBundle> DecodeBundle(absl::string_view bytes);

// Bytes, valid while `owner` lives.
struct HeldBytes {
  absl::string_view bytes;
  std::shared_ptr<const void> owner;
};

// An entry's listing: what lookup checks before fetching the bundle.
struct ObjectEntryMeta {
  ArtifactKey key;  // {key1, kObject, -, entry id}
  std::string source;
  Manifest manifest;
  std::vector<KeyField> fields;
  uint64_t size = 0;
};
ObjectEntryMeta EntryMetaFromArtifact(const ArtifactMeta& meta);
Artifact ArtifactFromEntry(const ObjectEntryMeta& entry, std::string bundle_bytes);
// The key of entry `manifest` under `key`.
ArtifactKey ObjectArtifactKey(const KernelId& key1, const Manifest& manifest);

// One page of the entries clients put (ObjectCache::ListClientMade).
struct ObjectPage {
  std::vector<ObjectEntryMeta> entries;
  std::string next_after;  // pass as `after` for the next page; empty: this was the last
};
// The page of `entries` (any order) whose encoded keys sort after `after`, in key order, up
// to about `max_bytes` of metadata (at least one entry).
ObjectPage PageOfEntries(std::vector<ObjectEntryMeta> entries, const std::string& after,
                         size_t max_bytes);
inline constexpr size_t kObjectPageBytes = size_t{1} << 20;

// The largest bundle stored, unless set otherwise: kcached's --max-object-bytes, the
// launchers' KCACHE_MAX_OBJECT_BYTES.
inline constexpr uint64_t kDefaultMaxObjectBytes = uint64_t{256} << 20;
// OK when a bundle of `bytes` may be stored under the bound `max_bytes` (--max-object-bytes,
// KCACHE_MAX_OBJECT_BYTES); ResourceExhausted naming both numbers when it is larger.
absl::Status CheckObjectBytes(uint64_t bytes, uint64_t max_bytes);

// Every failure is a value: the launcher then compiles uncached.
//
// Thread safety is each implementation's, stated where it is made. kcached's are thread-safe:
// over a store (below: the store is), its baked and writable stores
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
  virtual absl::StatusOr<std::vector<ObjectEntryMeta>> List(const KernelId& key1) = 0;
  // One entry's bundle bytes, checksum verified. NotFound when absent or corrupt.
  virtual absl::StatusOr<std::string> Get(const ArtifactKey& key) = 0;
  // The same bytes, held where they are when the cache can (kcache-launch: in kcached's
  // fast-path arena, leased until the owner goes) rather than copied; Get's, owned, otherwise.
  virtual absl::StatusOr<HeldBytes> GetHeld(const ArtifactKey& key);
  virtual absl::Status Put(const ObjectEntryMeta& entry, const std::string& bundle) = 0;
  // Every entry (metadata only): `kcache explain` looks for the same source among them.
  virtual absl::StatusOr<std::vector<ObjectEntryMeta>> ListAll() = 0;
  // Notes that the entry under `key` was just served from a tier above this cache (kcached's
  // memory, its fast path's arena), so that the writable store's LRU bound sees it as
  // recently used (Store::RecordUse: cheap, batched). Does nothing where no store has a bound.
  virtual void RecordUse(const ArtifactKey& key) {}
  // Deletes one entry (OK when absent). Unimplemented where the cache cannot delete.
  virtual absl::Status Delete(const ArtifactKey& key) {
    return absl::UnimplementedError("this object cache cannot delete entries");
  }
  // A page of the entries clients put (PageOfEntries over kcached's writable store; every
  // entry of a store directory), for `kcache export`. Unimplemented where the cache cannot.
  virtual absl::StatusOr<ObjectPage> ListClientMade(const std::string& after) {
    return absl::UnimplementedError("this object cache cannot list client-made entries");
  }
};

// Over a store; `store` is borrowed and must outlive the cache. Thread-safe (Store is).
std::unique_ptr<ObjectCache> NewStoreObjectCache(Store* store);
// The same, owning the store (closed with the cache).
std::unique_ptr<ObjectCache> NewOwningStoreObjectCache(std::unique_ptr<Store> store);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_CACHE_H_
