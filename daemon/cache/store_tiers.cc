#include "daemon/cache/store_tiers.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/objects/object_schema.h"

namespace kcache {

HealthCheckedTiers::HealthCheckedTiers(Store* local, const std::vector<Store*>& baked,
                                       absl::Duration off_initial, absl::Duration off_max,
                                       Statistics* stats)
    : stats_(stats) {
  tiers_.push_back(std::make_unique<Tier>(local, off_initial, off_max));
  for (Store* store : baked) tiers_.push_back(std::make_unique<Tier>(store, off_initial, off_max));
  checksum_failures_.assign(tiers_.size(), 0);
}

bool HealthCheckedTiers::available(size_t tier) const {
  return tiers_[tier]->health.Available(absl::Now());
}

absl::Status HealthCheckedTiers::Call(size_t tier, absl::FunctionRef<absl::Status(Store&)> call) {
  Tier& t = *tiers_[tier];
  if (!t.health.Available(absl::Now())) {
    stats_->Add(Statistic::kTierSkips);
    return absl::UnavailableError(absl::StrCat(
        "store ", t.store->path(), " is switched off after failing; it is retried shortly"));
  }
  absl::Status s = call(*t.store);
  // A full disk refuses writes but the store still reads: not a failing tier.
  if (s.ok() || absl::IsNotFound(s) || absl::IsResourceExhausted(s)) {
    t.health.RecordSuccess();
  } else {
    stats_->Add(Statistic::kTierFailures);
    if (t.health.RecordFailure(absl::Now())) stats_->Add(Statistic::kTiersSwitchedOff);
  }
  return s;
}

template <typename T>
absl::StatusOr<T> HealthCheckedTiers::CallFor(size_t tier,
                                              absl::FunctionRef<absl::StatusOr<T>(Store&)> call) {
  std::optional<absl::StatusOr<T>> result;
  absl::Status s = Call(tier, [&](Store& store) {
    result.emplace(call(store));
    return result->status();
  });
  if (!result) return s;  // skipped
  return *std::move(result);
}

absl::StatusOr<KernelRecord> HealthCheckedTiers::GetKernel(size_t tier, const KernelId& id) {
  return CallFor<KernelRecord>(tier, [&](Store& s) { return s.GetKernel(id); });
}

absl::StatusOr<std::vector<ArtifactMeta>> HealthCheckedTiers::ListArtifacts(size_t tier,
                                                                            const KernelId& id) {
  return CallFor<std::vector<ArtifactMeta>>(tier, [&](Store& s) { return s.ListArtifacts(id); });
}

absl::StatusOr<Artifact> HealthCheckedTiers::Get(size_t tier, const ArtifactKey& key) {
  return CallFor<Artifact>(tier, [&](Store& s) { return s.Get(key); });
}

absl::Status HealthCheckedTiers::Put(size_t tier, const Artifact& artifact) {
  return Call(tier, [&](Store& s) { return s.Put(artifact); });
}

absl::Status HealthCheckedTiers::PutCopy(size_t tier, const Artifact& artifact) {
  return Call(tier, [&](Store& s) { return s.PutCopy(artifact); });
}

absl::Status HealthCheckedTiers::PutKernel(size_t tier, const KernelRecord& record) {
  return Call(tier, [&](Store& s) { return s.PutKernel(record); });
}

absl::StatusOr<std::vector<KernelRecord>> HealthCheckedTiers::ListKernels(size_t tier) {
  return CallFor<std::vector<KernelRecord>>(tier, [&](Store& s) { return s.ListKernels(); });
}

absl::StatusOr<std::vector<ArtifactMeta>> HealthCheckedTiers::ListAllArtifacts(size_t tier) {
  return CallFor<std::vector<ArtifactMeta>>(tier, [&](Store& s) { return s.ListAllArtifacts(); });
}

absl::StatusOr<StoreStats> HealthCheckedTiers::Stats(size_t tier) {
  return CallFor<StoreStats>(tier, [&](Store& s) { return s.Stats(); });
}

TiersSnapshot HealthCheckedTiers::Snapshot() {
  TiersSnapshot snapshot;
  absl::MutexLock lock(&snapshot_mu_);
  for (size_t t = 0; t < tiers_.size(); ++t) {
    StoreSnapshot store;
    store.path = tiers_[t]->store->path();
    store.tier = kind(t);
    store.available = available(t);
    absl::StatusOr<StoreStats> stats = Stats(t);
    if (stats.ok() && t == 0) last_local_ = *stats;
    if (stats.ok()) {
      checksum_failures_[t] = stats->checksum_failures;
      store.stats_ok = true;
      store.kernels = stats->kernels;
      store.artifacts = stats->artifacts;
      store.artifact_bytes = stats->artifact_bytes;
      store.disk_bytes = stats->disk_bytes;
    }
    store.checksum_failures = checksum_failures_[t];
    snapshot.checksum_failures += checksum_failures_[t];
    snapshot.stores.push_back(std::move(store));
  }
  snapshot.writable = last_local_;
  return snapshot;
}

absl::StatusOr<std::vector<ListedKernelInfo>> ListTiers(HealthCheckedTiers& tiers) {
  std::map<KernelId, ListedKernelInfo> kernels;
  std::set<KernelId> with_record;
  std::set<ArtifactKey> listed;
  absl::Status first_failure;
  int answered = 0;
  for (size_t t = 0; t < tiers.size(); ++t) {
    absl::StatusOr<std::vector<KernelRecord>> records = tiers.ListKernels(t);
    absl::StatusOr<std::vector<ArtifactMeta>> metas =
        records.ok() ? tiers.ListAllArtifacts(t) : records.status();
    if (!metas.ok()) {
      if (first_failure.ok()) first_failure = metas.status();
      continue;
    }
    ++answered;
    for (KernelRecord& record : *records) {
      if (!with_record.insert(record.id).second) continue;  // an upper tier's record wins
      KernelId id = record.id;
      kernels[id].record = std::move(record);
    }
    for (ArtifactMeta& meta : *metas) {
      if (objects::IsObjectArtifact(meta)) continue;
      if (!listed.insert(meta.key).second) continue;  // held above too: listed there
      ListedKernelInfo& kernel = kernels[meta.key.kernel_id];
      if (!with_record.contains(meta.key.kernel_id)) {
        kernel.record.id = meta.key.kernel_id;
        kernel.record.spec.name = meta.kernel_name;
      }
      kernel.artifacts.push_back(ListedArtifactInfo{std::move(meta), tiers.kind(t)});
    }
  }
  if (answered == 0) {
    return absl::UnavailableError(
        absl::StrCat("every store tier is failing: ", first_failure.message(), "; retry shortly"));
  }
  std::vector<ListedKernelInfo> out;
  for (auto& [id, kernel] : kernels) out.push_back(std::move(kernel));
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.record.spec.name < b.record.spec.name;
  });
  return out;
}

}  // namespace kcache
