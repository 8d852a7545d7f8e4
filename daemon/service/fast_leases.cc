// The fast path's leases on its arena: one connection's, within its bound, and their gauges.
#include "daemon/service/fast_leases.h"

#include "absl/strings/str_cat.h"

namespace kcache {

void FastArenaGauges::Publish() {
  absl::MutexLock lock(&mu_);
  uint64_t leases = arena_->leases();
  uint64_t bytes = arena_->bytes_in_use();
  stats_->Move(Statistic::kFastLeasesHeld,
               static_cast<int64_t>(leases) - static_cast<int64_t>(leases_shown_));
  stats_->Move(Statistic::kFastArenaBytes,
               static_cast<int64_t>(bytes) - static_cast<int64_t>(bytes_shown_));
  leases_shown_ = leases;
  bytes_shown_ = bytes;
}

FastLeases::~FastLeases() {
  for (auto& [lease, held] : leases_) arena_->Release(held.slot);
  leases_.clear();
  gauges_->Publish();
}

absl::StatusOr<FastLeases::Leased> FastLeases::Take(
    uint64_t size, absl::FunctionRef<absl::StatusOr<FastArena::Placed>()> place) {
  if (leased_bytes_ + size > max_bytes_) {
    stats_->Add(Statistic::kFastFallbackLeaseBound);
    return absl::ResourceExhaustedError(absl::StrCat(
        "this connection holds ", leased_bytes_, " bytes of leases; --fast-leased-max-bytes is ",
        max_bytes_, ": release some, or use gRPC"));
  }
  absl::StatusOr<FastArena::Placed> placed = place();
  if (!placed.ok()) {
    if (absl::IsResourceExhausted(placed.status())) {
      stats_->Add(Statistic::kFastFallbackArenaFull);
    }
    return placed.status();
  }
  uint64_t lease = next_lease_++;
  leases_[lease] = Lease{placed->slot, size};
  leased_bytes_ += size;
  gauges_->Publish();
  return Leased{lease, placed->offset};
}

bool FastLeases::Release(uint64_t lease) {
  auto it = leases_.find(lease);
  if (it == leases_.end()) return false;
  arena_->Release(it->second.slot);
  leased_bytes_ -= it->second.bytes;
  leases_.erase(it);
  gauges_->Publish();
  return true;
}

}  // namespace kcache
