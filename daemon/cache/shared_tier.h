// SharedTier: the daemon's tier on a Redis Cluster (or one Redis) that a fleet of daemons
// shares (docs/shared-tier.md). Looked up after the baked stores and before a compile; what a
// daemon compiles it writes there, from a writer thread, so a write never delays an answer.
// Entries are signed frames (engine/shared/shared_entry.h): one that does not verify is
// counted (shared.rejected), logged once per key, never returned, and overwritten by the next
// write of that artifact.
//
// Failure: a lookup waits at most `budget`; a failed or late call is counted (shared.errors)
// and switches the tier off (TierHealth: 5 s, doubling up to a minute), during which lookups
// and writes are skipped (shared.skips). Nothing here fails a request.
//
// Thread-safe. Destroying it stops the writer; writes still queued are dropped.
#ifndef KCACHE_DAEMON_CACHE_SHARED_TIER_H_
#define KCACHE_DAEMON_CACHE_SHARED_TIER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/artifact.h"
#include "core/background_writer.h"
#include "daemon/cache/shared_tier_options.h"
#include "daemon/cache/statistics.h"
#include "daemon/cache/store_tiers.h"
#include "engine/shared/redis_cluster.h"
#include "engine/shared/redis_lease.h"
#include "engine/shared/shared_entry.h"

namespace kcache {

class SharedTier {
 public:
  // InvalidArgument for a bad URL. Connects only when first used.
  static absl::StatusOr<std::unique_ptr<SharedTier>> Create(SharedTierOptions options,
                                                            Statistics* stats);
  ~SharedTier();
  SharedTier(const SharedTier&) = delete;
  SharedTier& operator=(const SharedTier&) = delete;

  // The artifacts under `keys`, when every one is there and verifies; else nullopt (a miss,
  // a rejected entry, a failing or switched-off tier: each counted).
  std::optional<std::vector<Artifact>> FetchAll(const std::vector<ArtifactKey>& keys);

  // After a FetchAll miss: takes the fleet's lease on `keys` (the first key's lease;
  // engine/shared/redis_lease.h), or, when another daemon holds it, waits for that daemon's
  // entry (polling) until it comes, the lease goes (expired: its holder died; or released: its
  // compile failed) and this daemon takes it, or options.wait passes. The artifacts when they
  // came; else nullopt, and this daemon compiles — holding the lease (renewed while its compile
  // runs) when `*lease` is set non-empty (pass it to Publish or ReleaseLease). A failing tier:
  // nullopt at once, no lease.
  std::optional<std::vector<Artifact>> AwaitFleet(const std::vector<ArtifactKey>& keys,
                                                  std::string* lease);

  // Queues each artifact to be written (those over the size cap are counted and skipped),
  // then the release of `lease` (empty: none) once they are written: it is renewed until then.
  void Publish(const std::vector<std::shared_ptr<const Artifact>>& artifacts,
               const std::string& lease = "");
  // Queues the release of a lease this daemon holds (its compile failed).
  void ReleaseLease(const std::string& lease);

  // Waits until every write queued so far was done or dropped (for tests and shutdown).
  void Flush();

  bool available() const { return health_.Available(absl::Now()); }

 private:
  SharedTier(SharedTierOptions options, std::unique_ptr<RedisCluster> reader,
             std::unique_ptr<RedisCluster> writer, std::unique_ptr<RedisCluster> leaser,
             Statistics* stats);
  void RecordFailure(const absl::Status& status);
  void LogRejectedOnce(const std::string& redis_key, const absl::Status& status);
  struct Write {
    std::shared_ptr<const Artifact> artifact;  // null: only release `lease`
    std::string lease;                         // released after this write ("" none)
  };
  void WriteOne(const Write& write);  // on the writer thread
  // `count`: count misses and rejections (the first look; a wait's polls are not counted).
  std::optional<std::vector<Artifact>> Fetch(const std::vector<ArtifactKey>& keys,
                                             absl::Time deadline, bool count);

  const SharedTierOptions options_;
  std::unique_ptr<RedisCluster> reader_;  // lookups, with the budget
  std::unique_ptr<RedisCluster> writer_;  // the writer thread's own connections
  Statistics* stats_;
  TierHealth health_;
  RedisLeases leases_;  // its own connections: taken here, renewed by its thread

  absl::Mutex mu_;
  absl::flat_hash_set<std::string> rejected_logged_ ABSL_GUARDED_BY(mu_);
  // At most options_.write_queue artifacts wait; at destruction what waits is dropped (its
  // lease expires). Last: joined first.
  BackgroundWriter<Write> writes_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_SHARED_TIER_H_
