// Client-made objects on the shared fleet tier (kcached --share-client-objects;
// docs/torch-extensions.md, "Sharing client-made objects across a fleet"): an ObjectCache over
// kcached's own (`pod`: the baked stores, then the writable store) that also keeps the entries
// clients put in the shared Redis (Cluster) tier, so that another opted-in kcached serves them.
//
// Trust: such an entry was built by a client of some pod; every pod that opts in serves it. A
// compromised pod of the fleet that opts in can therefore put a poisoned object that every
// opted-in pod serves. The signing key keeps out writers without it (a Redis reachable by
// others), not opted-in pods.
//
// Redis keys, a namespace apart from the kernels' "kcache:v1:{...}" entries; K is the hex of
// the entry's key1, E its entry id:
//   kcache:obj:v1:{K}:E     the entry: its artifact (metadata and bundle) in a signed frame
//   kcache:obj:v1:{K}:list  a hash: E -> the entry's metadata (no bundle) in a signed frame
// Frames are the shared tier's (engine/shared/shared_entry.h), the MAC over the Redis key (for
// a listing field, "kcache:obj:v1:{K}:list:E"), and the artifact inside must be the one asked
// for: a frame copied under another key, damaged, or sealed without the key never opens.
//
// Lookup: Get asks `pod` first; on its miss, the tier (one call of at most `budget`); an entry
// that verifies is copied into the writable store (through `pod`) and served. List asks the
// tier only when `pod` lists nothing under key1. Put: `pod` first (its refusals stand: over
// max_object_bytes, a key a baked store holds); then the entry is queued, and the cache's own
// writer thread writes it and its listing to the tier (each write at most `write_deadline`):
// a put never waits for Redis. At most kMaxFleetWritesQueued entries and max_object_bytes of
// bundles wait; past that a write is dropped (counted). Destroying the cache stops the
// writer; writes still queued are dropped. ListAll and Delete: `pod` only.
//
// One compile per miss (compile_turns.h): the cache is also the fleet's part of kcached's
// launcher turns (FleetCompileLeases), on `leases` (engine/shared/redis_lease.h) under
//   kcache:obj:v1:{K}:turn  the lease of the kcached whose launcher compiles key1 now
// A waiting kcached looks every 50 ms at the listing's entry ids (at most kMaxFleetListing of
// them, kMaxFleetTurnIdBytes in all, or the tier failed): an id that was not there when it
// began (nor in the launcher's lookup) is fetched (verified as a Get: copied into `pod`) and
// ends the wait. The holder's
// release is queued behind the writes of the entries put before it, so a waiter never sees the
// lease go before the entry is there.
//
// Counted (FleetObjectCount): a Get served from the tier (hit); a Get or List the tier did not
// hold (miss); an entry written (put); a write dropped, the queue full (write dropped); a frame
// that does not verify, a bundle over max_object_bytes, a frame or listing over the bounds below
// (refused: never served, and read without buffering more than the bound); a failed call (error).
// After an error the tier is skipped (a miss, uncounted) for a while (core/tier_health.h: from
// `off_initial`, doubling while it keeps failing, up to `off_max`; kcached's shared tier for
// kernels follows the same rule). Nothing here fails a request.
//
// Thread-safe when `pod` is; `redis` is owned (RedisCluster is thread-safe).
#ifndef KCACHE_DAEMON_OBJECTS_FLEET_OBJECT_CACHE_H_
#define KCACHE_DAEMON_OBJECTS_FLEET_OBJECT_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "core/tier_health.h"
#include "daemon/objects/compile_turns.h"
#include "engine/objects/object_cache.h"
#include "engine/shared/redis_cluster.h"
#include "engine/shared/redis_lease.h"
#include "engine/shared/shared_entry.h"

namespace kcache::objects {

// Entries of one key1 a listing may hold, and the bytes of its frames, before it is refused.
inline constexpr int kMaxFleetListing = 64;
inline constexpr uint64_t kMaxFleetListingBytes = uint64_t{32} << 20;
// What an entry's frame may hold besides its bundle (the metadata: manifest, key fields).
inline constexpr uint64_t kMaxFleetMetaBytes = uint64_t{16} << 20;
// Entries waiting for the writer thread (with at most max_object_bytes of bundles in all).
inline constexpr size_t kMaxFleetWritesQueued = 64;
// The entry ids of one listing a waiting kcached reads, in all (64 of 64 hex digits, and room).
inline constexpr uint64_t kMaxFleetTurnIdBytes = uint64_t{64} << 10;

struct FleetObjectOptions {
  SharedKeys keys;  // --shared-key-file (and its second): seal and open
  uint64_t max_object_bytes = kDefaultMaxObjectBytes;  // --object-max-bytes
  absl::Duration budget = absl::Milliseconds(100);     // --shared-budget-ms: one lookup
  absl::Duration write_deadline = absl::Seconds(2);
  absl::Duration off_initial = absl::Seconds(5);
  absl::Duration off_max = absl::Minutes(1);
};

enum class FleetObjectCount { kHit, kMiss, kPut, kRefused, kError, kWriteDropped };

// The Redis keys above (for tests and tools).
std::string FleetObjectRedisKey(const ObjectEntryKey& key);
std::string FleetListingRedisKey(const CommandKey& key1);
std::string FleetTurnRedisKey(const CommandKey& key1);

struct FleetObjects {
  std::unique_ptr<ObjectCache> cache;
  FleetCompileLeases* leases = nullptr;  // the cache's own: valid while it lives
};
// `count` is called from the calling thread, the writer thread or the leases' renewing
// thread; may be empty. `leases`' failures are counted as errors by the caller that made it.
FleetObjects NewFleetObjectCache(std::unique_ptr<ObjectCache> pod,
                                 std::unique_ptr<RedisCluster> redis,
                                 std::unique_ptr<RedisLeases> leases, FleetObjectOptions options,
                                 std::function<void(FleetObjectCount)> count);

}  // namespace kcache::objects

#endif  // KCACHE_DAEMON_OBJECTS_FLEET_OBJECT_CACHE_H_
