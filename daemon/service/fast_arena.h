// FastArena: the read-only shared memory of kcached's in-pod fast path (docs/kcached.md,
// "The fast path"). One memfd of a fixed size, mapped read-write by the daemon and then sealed
// (no grow, no shrink, no writable mapping or write() by anyone else, no new seals), holds
// artifacts in slots; a worker maps the descriptor PROT_READ and reads them in place.
//
// Slots: first fit over the free ranges (coalesced when freed), each slot 64-byte aligned and
// one byte longer than its artifact (a NUL, so PTX is a C string in place). An artifact is
// written once; later requests for it reuse its slot. A slot with leases is never reused;
// unleased slots are reused least recently used first when room is needed. Nothing grows past
// the arena: when the leased slots leave no room, Place answers ResourceExhausted and the
// caller serves over gRPC.
//
// Thread-safe: one mutex guards the table, the free list and the writes into the arena.
#ifndef KCACHE_DAEMON_SERVICE_FAST_ARENA_H_
#define KCACHE_DAEMON_SERVICE_FAST_ARENA_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/artifact.h"

namespace kcache {

inline constexpr uint64_t kFastSlotAlign = 64;

class FastArena {
 public:
  // Creates, sizes, maps and seals the arena. FailedPrecondition naming the cause when the
  // kernel lacks memfd_create or F_SEAL_FUTURE_WRITE (Linux < 5.1): the fast path is then off.
  static absl::StatusOr<std::unique_ptr<FastArena>> Create(uint64_t bytes);
  ~FastArena();
  FastArena(const FastArena&) = delete;
  FastArena& operator=(const FastArena&) = delete;

  int fd() const { return fd_; }  // the memfd, owned here; sent to clients with SCM_RIGHTS
  uint64_t size() const { return size_; }

  struct Placed {
    uint64_t slot = 0;  // id, for Release
    uint64_t offset = 0;
  };
  // The slot of `artifact` (written now if it has none), with one more lease on it.
  // ResourceExhausted when no slot can be made free for it.
  absl::StatusOr<Placed> Place(const std::shared_ptr<const Artifact>& artifact);
  // The same for bytes that are no artifact (a compiler-object listing or bundle): `key` names
  // them in the arena and must change whenever the bytes do (put their checksum in it).
  absl::StatusOr<Placed> PlaceBytes(std::string key, absl::string_view bytes);
  // One more lease on the slot already under `key` (PlaceBytes' key); NotFound when there is
  // none (never placed, or evicted since).
  absl::StatusOr<Placed> LeaseExisting(const std::string& key);
  // Writes `artifact` into a slot now, unleased (reusable when room is needed), unless it has
  // one; never evicts for it. False when there is no free room.
  bool Preload(const std::shared_ptr<const Artifact>& artifact);
  // Gives back one lease taken by Place.
  void Release(uint64_t slot);

  uint64_t bytes_in_use() const;  // the slots' bytes, leased or not
  uint64_t leases() const;        // leases held now

 private:
  struct Slot {
    uint64_t id = 0;
    std::string key;  // artifact key (encoded) + checksum
    uint64_t offset = 0;
    uint64_t length = 0;  // aligned length, NUL included
    uint64_t leases = 0;
    std::list<uint64_t>::iterator lru;  // in unleased_ when leases == 0
  };

  FastArena(int fd, char* base, uint64_t size);
  // One more lease on `slot`.
  Placed LeaseLocked(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllocateLocked(uint64_t length, uint64_t* offset) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies `bytes` to `offset` (allocated, `length` long) and records a slot for it, with
  // no lease and not yet in unleased_: the caller sets one or the other.
  Slot& WriteSlotLocked(absl::string_view bytes, std::string key, uint64_t offset, uint64_t length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeLocked(uint64_t offset, uint64_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked(uint64_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fd_;
  char* const base_;  // the daemon's read-write mapping, made before sealing
  const uint64_t size_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Slot> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> by_key_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint64_t> free_ ABSL_GUARDED_BY(mu_);  // offset -> length
  std::list<uint64_t> unleased_ ABSL_GUARDED_BY(mu_);       // slot ids, least recent first
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unleased_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of the slots in unleased_
  uint64_t leases_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_FAST_ARENA_H_
