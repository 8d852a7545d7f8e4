// The fast path's kernel answers: a Resolve looked up without compiling and leased in the arena.
#include "daemon/service/fast_kernel_answers.h"

#include <utility>

#include "core/protocol.h"
#include "daemon/service/wire_convert.h"

namespace kcache {

absl::StatusOr<v1::FastResponse> FastKernelAnswers::Resolve(
    FastLeases& leases, uint64_t tag, const v1::ResolveRequest& request) const {
  v1::FastResponse response;
  response.set_tag(tag);
  absl::Time arrived = absl::Now();
  absl::StatusOr<ResolveQuery> query = CheckedQueryFromProto(request);
  if (!query.ok()) {
    stats_->RecordInvalidRequest(absl::Now() - arrived);
    return query.status();
  }
  bool ptx_now = query->ptx_now;
  ArtifactCache::Peeked peeked = cache_->Peek(*std::move(query));
  if (!peeked.served.ok()) {
    if (absl::IsInvalidArgument(peeked.served.status())) {  // final: the client asks no more
      cache_->CommitPeek(peeked);
      return peeked.served.status();
    }
    if (!absl::IsNotFound(peeked.served.status())) {  // every tier failing, ...: as it is
      return peeked.served.status();
    }
    stats_->Add(Statistic::kFastFallbackMiss);
    return absl::NotFoundError("not served on the fast path: ask over gRPC");
  }
  const Served& served = *peeked.served;
  if (served.artifact == nullptr) {
    return absl::InternalError("the cache served no artifact");
  }
  if (served.rule == ServeRule::kPtxJit && !ptx_now) {  // gRPC may compile the SASS
    stats_->Add(Statistic::kFastFallbackMiss);
    return absl::NotFoundError("not served on the fast path: ask over gRPC");
  }
  absl::StatusOr<FastLeases::Leased> leased =
      leases.Take(served.artifact->bytes.size(), [&] { return arena_->Place(served.artifact); });
  if (!leased.ok()) return leased.status();
  HeaderFromServed(served, response.mutable_header());
  response.set_offset(leased->offset);
  response.set_lease(leased->lease);
  if (response.ByteSizeLong() > kMaxFastMessageBytes) {
    leases.Release(leased->lease);
    return absl::ResourceExhaustedError(
        "the answer's header (its compile log) is too large for the fast path: use gRPC");
  }
  cache_->CommitPeek(peeked);
  stats_->Add(Statistic::kFastHits);
  return response;
}

}  // namespace kcache
