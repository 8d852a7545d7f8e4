// FastObjectAnswers: the fast path's answers to the compiler launchers (fast_path_server.h):
// list_objects and get_object, the listing or the bundle placed in the arena under a lease of
// the asking connection, and note_uncached, a command the launcher ran uncached, counted.
#ifndef KCACHE_DAEMON_SERVICE_FAST_OBJECT_ANSWERS_H_
#define KCACHE_DAEMON_SERVICE_FAST_OBJECT_ANSWERS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/bounded_lru.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/fast_arena.h"
#include "daemon/service/fast_leases.h"
#include "engine/objects/object_cache.h"
#include "kcache/v1/fast_path.pb.h"

namespace kcache {

// Thread-safe (the object cache, the statistics, the arena and the remembered answers are).
// `objects` (nullable: then lookups are refused), `stats` and `arena` are borrowed and must
// outlive it.
class FastObjectAnswers {
 public:
  // `generation`: the object cache's (objects::MemoObjectCache::Generation). While it stays
  // the same, a listing or bundle answered once is answered again from its slot in the arena,
  // not read, encoded and checksummed again per launcher. Unset: never.
  FastObjectAnswers(objects::ObjectCache* objects, Statistics* stats, FastArena* arena,
                    std::function<uint64_t()> generation)
      : objects_(objects), stats_(stats), arena_(arena), generation_(std::move(generation)) {}

  // list_objects or get_object: the listing (a serialized ListObjectsResponse) or the bundle,
  // placed in the arena under a lease taken in `leases`. Counted as objects.* like the gRPC
  // calls: a listing a lookup, a get an object served. kcache-launch hands a miss's listing on
  // to kcache, which does not list it again (client/launch/handed_miss_memfd.h): one launcher
  // run, one lookup.
  // The refusal otherwise: FailedPrecondition (no object cache here), InvalidArgument (a
  // listing of every entry is gRPC's), a lease's or the object cache's error.
  absl::StatusOr<v1::FastResponse> Lookup(FastLeases& leases, const v1::FastRequest& request);
  // note_uncached: counted by reason (objects.uncached_*) and option. InvalidArgument for a
  // reason that is none.
  absl::Status NoteUncached(const v1::FastRequest& request);
  // note_cuda_stand_in: counted in run.cuda_stand_in_*. InvalidArgument for a number that is
  // no StandInStart told (1 to 3).
  absl::Status NoteCudaStandIn(const v1::FastRequest& request);

 private:
  // An object answer in the arena: its slot's key, size and checksum; and the lease taken on
  // it for this request.
  struct Answered {
    std::string slot_key;
    uint64_t size = 0;
    uint64_t checksum = 0;
    uint64_t lease = 0;
    uint64_t offset = 0;
  };
  struct RememberedAnswer {
    Answered answer;
    uint64_t generation = 0;
  };
  // The bytes of the records of answers remembered for Reanswer (their names and slot keys,
  // and what a record costs beyond them): about 4,000 records, least recently used dropped.
  static constexpr uint64_t kRememberedAnswerBytes = uint64_t{1} << 20;
  static constexpr uint64_t kRememberedAnswerOverhead = 128;

  // The answer under `name` given before in this generation, leased again from its slot.
  // NotFound when there is none, the generation moved on or its slot was evicted (answer it
  // afresh); the lease bound's refusal otherwise.
  absl::StatusOr<Answered> Reanswer(FastLeases& leases, const std::string& name,
                                    uint64_t generation);
  // The listing or bundle `request` asks for, read from the object cache, placed in the arena
  // under `name` and its checksum, and leased; remembered under `generation` for Reanswer.
  absl::StatusOr<Answered> AnswerAfresh(FastLeases& leases, const v1::FastRequest& request,
                                        const std::string& name, uint64_t generation);
  void Remember(const std::string& name, const Answered& answer, uint64_t generation);

  objects::ObjectCache* const objects_;
  Statistics* const stats_;
  FastArena* const arena_;
  const std::function<uint64_t()> generation_;
  BoundedLru<std::string, RememberedAnswer> answers_{kRememberedAnswerBytes};
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_FAST_OBJECT_ANSWERS_H_
