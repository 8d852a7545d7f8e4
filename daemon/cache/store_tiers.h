// The artifact cache's store tiers: its writable store and its read-only baked stores, each
// behind a health switch. A tier whose calls fail (an error other than NotFound, or
// ResourceExhausted: a full disk refuses writes, reads go on) is switched off for a while,
// counted and skipped; it slows requests down, never fails them while another
// tier or the compiler can answer.
#ifndef KCACHE_DAEMON_CACHE_STORE_TIERS_H_
#define KCACHE_DAEMON_CACHE_STORE_TIERS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/tier_health.h"
#include "daemon/cache/cache_types.h"
#include "daemon/cache/statistics.h"
#include "engine/resolve/decide.h"
#include "engine/store/store.h"

namespace kcache {

// The store tiers as a snapshot shows them.
struct TiersSnapshot {
  std::vector<StoreSnapshot> stores;  // in tier order: the writable store first
  uint64_t checksum_failures = 0;     // over every tier, the count each last reported
  // The writable store's last statistics read, kept while it is off or its read fails (its
  // eviction and full-disk counts).
  StoreStats writable;
};

// The daemon's StoreTiers (the interface the serving rules read, engine/resolve/decide.h), each
// behind a TierHealth. Tier 0 is the writable store, tiers 1..n the baked stores in order.
// Thread-safe.
class HealthCheckedTiers : public StoreTiers {
 public:
  // `local` and `baked` are borrowed and must outlive this; `stats` too.
  HealthCheckedTiers(Store* local, const std::vector<Store*>& baked, absl::Duration off_initial,
                     absl::Duration off_max, Statistics* stats);

  size_t size() const override { return tiers_.size(); }
  absl::StatusOr<KernelRecord> GetKernel(size_t tier, const KernelId& id) override;
  absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(size_t tier, const KernelId& id) override;
  absl::StatusOr<Artifact> Get(size_t tier, const ArtifactKey& key) override;

  absl::Status Put(size_t tier, const Artifact& artifact);
  absl::Status PutCopy(size_t tier, const Artifact& artifact);  // Store::PutCopy
  absl::Status PutKernel(size_t tier, const KernelRecord& record);
  absl::StatusOr<std::vector<KernelRecord>> ListKernels(size_t tier);
  absl::StatusOr<std::vector<ArtifactMeta>> ListAllArtifacts(size_t tier);
  absl::StatusOr<StoreStats> Stats(size_t tier);

  // The tier's place in the hierarchy: kLocalStore for 0, kBakedStore for the others.
  CacheTier kind(size_t tier) const {
    return tier == 0 ? CacheTier::kLocalStore : CacheTier::kBakedStore;
  }
  // Whether the tier is on now (or due to be tried again).
  bool available(size_t tier) const;
  // The store itself, bypassing the health switch (Warm writes through it directly).
  Store& store(size_t tier) const { return *tiers_[tier]->store; }

  // Every tier's path, kind, availability and statistics, read now (a walk of each store's
  // artifact index: for `kcache stat` and a metrics scrape, not for every request). A tier
  // whose statistics cannot be read shows zeros (stats_ok false) and the checksum-failure
  // count it last reported. Snapshots run one at a time.
  TiersSnapshot Snapshot();

 private:
  struct Tier {
    Tier(Store* s, absl::Duration initial, absl::Duration max) : store(s), health(initial, max) {}
    Store* store;
    TierHealth health;
  };

  // Runs `call` on the tier unless it is switched off (then Unavailable, counted as a skip);
  // records the outcome in the tier's health and the statistics.
  absl::Status Call(size_t tier, absl::FunctionRef<absl::Status(Store&)> call);
  template <typename T>
  absl::StatusOr<T> CallFor(size_t tier, absl::FunctionRef<absl::StatusOr<T>(Store&)> call);

  std::vector<std::unique_ptr<Tier>> tiers_;
  Statistics* stats_;

  absl::Mutex snapshot_mu_;
  // Per tier, the last checksum-failure count its Stats() reported (kept while it is off).
  std::vector<uint64_t> checksum_failures_ ABSL_GUARDED_BY(snapshot_mu_);
  StoreStats last_local_ ABSL_GUARDED_BY(snapshot_mu_);  // TiersSnapshot::writable
};

// Every kernel known to any tier, with its artifacts and the tier each lives in (an artifact
// held by several tiers is listed once, in the upper one; a record in an upper tier wins).
// Kernels without a record are listed with their id and the name their artifacts carry.
// Compiler outputs and NVRTC outcomes (objects::IsObjectArtifact) are no kernel's and are left
// out: the object service lists them. Sorted by name. A failing tier is skipped; Unavailable
// when every tier fails.
absl::StatusOr<std::vector<ListedKernelInfo>> ListTiers(HealthCheckedTiers& tiers);

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_STORE_TIERS_H_
