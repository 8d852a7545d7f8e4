// The fast path's answers to the compiler launchers: object lookups leased in the arena, notes.
#include "daemon/service/fast_object_answers.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/artifact.h"
#include "core/compiler_command.h"
#include "core/protocol.h"
#include "daemon/service/object_cache_service.h"
#include "kcache/v1/objects.pb.h"

namespace kcache {

absl::StatusOr<v1::FastResponse> FastObjectAnswers::Lookup(FastLeases& leases,
                                                           const v1::FastRequest& request) {
  if (objects_ == nullptr) {
    return absl::FailedPreconditionError(
        "this kcached serves no compiler objects on its fast path: use gRPC "
        "(kcache.v1.ObjectCache)");
  }
  bool listing = request.has_list_objects();
  if (listing && request.list_objects().all()) {
    return absl::InvalidArgumentError(
        "list_objects: listing every entry (all) is gRPC's ListObjects, not the fast path's");
  }
  std::string name = listing ? absl::StrCat("objects-list/", request.list_objects().key1())
                             : absl::StrCat("object/", request.get_object().key1(), "/",
                                            request.get_object().entry_id());
  uint64_t generation = generation_ ? generation_() : 0;
  absl::StatusOr<Answered> answered = Reanswer(leases, name, generation);
  if (absl::IsNotFound(answered.status())) {
    answered = AnswerAfresh(leases, request, name, generation);
  } else if (answered.ok() && !listing) {
    // Served from the arena, not the cache: the stores' LRU bound is told all the same.
    RecordObjectUse(*objects_, request.get_object());
  }
  if (!answered.ok()) return answered.status();
  stats_->Add(listing ? Statistic::kObjectLookups : Statistic::kObjectsServed);
  v1::FastResponse response;
  response.set_tag(request.tag());
  response.mutable_header()->set_size(answered->size);
  response.mutable_header()->set_checksum(answered->checksum);
  response.set_offset(answered->offset);
  response.set_lease(answered->lease);
  return response;
}

absl::StatusOr<FastObjectAnswers::Answered> FastObjectAnswers::Reanswer(FastLeases& leases,
                                                                        const std::string& name,
                                                                        uint64_t generation) {
  if (!generation_) return absl::NotFoundError("answers are not reused");
  Answered answered;
  std::optional<RememberedAnswer> remembered = answers_.Find(name);
  if (!remembered.has_value() || remembered->generation != generation) {
    return absl::NotFoundError("not answered in this generation");
  }
  answered = remembered->answer;
  absl::StatusOr<FastLeases::Leased> leased =
      leases.Take(answered.size, [&] { return arena_->LeaseExisting(answered.slot_key); });
  if (!leased.ok()) return leased.status();
  answered.lease = leased->lease;
  answered.offset = leased->offset;
  stats_->Add(Statistic::kObjectMemoryHits);
  return answered;
}

absl::StatusOr<FastObjectAnswers::Answered> FastObjectAnswers::AnswerAfresh(
    FastLeases& leases, const v1::FastRequest& request, const std::string& name,
    uint64_t generation) {
  bool listing = request.has_list_objects();
  std::string bytes;
  if (listing) {
    v1::ListObjectsResponse entries;
    absl::Status listed = ListObjectsByKey(*objects_, request.list_objects(), &entries);
    if (!listed.ok()) return listed;
    bytes = entries.SerializeAsString();
  } else {
    absl::StatusOr<std::string> bundle = GetObjectBytes(*objects_, request.get_object());
    if (!bundle.ok()) return bundle.status();
    bytes = *std::move(bundle);
  }
  Answered fresh;
  fresh.size = bytes.size();
  fresh.checksum = PayloadChecksum(bytes);
  // New bytes under the same name: another slot.
  fresh.slot_key = absl::StrCat(name, "/", fresh.checksum);
  absl::StatusOr<FastLeases::Leased> leased =
      leases.Take(bytes.size(), [&] { return arena_->PlaceBytes(fresh.slot_key, bytes); });
  if (!leased.ok()) return leased.status();
  fresh.lease = leased->lease;
  fresh.offset = leased->offset;
  // An empty listing (no bytes: a ListObjectsResponse without entries) is asked again next
  // time, so that a new entry in a store or the fleet tier shows at once, as
  // objects::MemoObjectCache does.
  if (generation_ && !(listing && fresh.size == 0)) Remember(name, fresh, generation);
  return fresh;
}

void FastObjectAnswers::Remember(const std::string& name, const Answered& answer,
                                 uint64_t generation) {
  answers_.Insert(name, RememberedAnswer{answer, generation},
                  name.size() + answer.slot_key.size() + kRememberedAnswerOverhead);
}

absl::Status FastObjectAnswers::NoteUncached(const v1::FastRequest& request) {
  if (request.note_uncached() == 0 || request.note_uncached() >= kUncachedReasonCount) {
    return absl::InvalidArgumentError(absl::StrCat("note_uncached ", request.note_uncached(),
                                                   " is no reason: 1 to ", kUncachedReasonCount - 1,
                                                   " (UncachedReason, core/compiler_command.h)"));
  }
  stats_->Add(UncachedStatistic(static_cast<UncachedReason>(request.note_uncached())));
  stats_->uncached_options().Add(static_cast<UncachedReason>(request.note_uncached()),
                                 request.note_uncached_option());
  return absl::OkStatus();
}

absl::Status FastObjectAnswers::NoteCudaStandIn(const v1::FastRequest& request) {
  switch (static_cast<StandInStart>(request.note_cuda_stand_in())) {
    case StandInStart::kPreloaded:
      stats_->Add(Statistic::kRunCudaStandInPreloaded);
      return absl::OkStatus();
    case StandInStart::kRefused:
      stats_->Add(Statistic::kRunCudaStandInRefused);
      return absl::OkStatus();
    case StandInStart::kOff:
      stats_->Add(Statistic::kRunCudaStandInOff);
      return absl::OkStatus();
    case StandInStart::kNotRouted:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("note_cuda_stand_in ", request.note_cuda_stand_in(), " is no start: 1 to ",
                   kStandInStartCount - 1, " (StandInStart, core/protocol.h)"));
}

}  // namespace kcache
