#include "daemon/service/fast_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1; older headers lack the name
#endif

namespace kcache {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

uint64_t SlotLength(uint64_t payload) {
  return (payload + 1 + kFastSlotAlign - 1) / kFastSlotAlign * kFastSlotAlign;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FastArena>> FastArena::Create(uint64_t bytes) {
  if (bytes < kFastSlotAlign) {
    return absl::InvalidArgumentError("the fast-path arena must hold at least 64 bytes");
  }
  bytes = bytes / kFastSlotAlign * kFastSlotAlign;
  int fd = memfd_create("kcache-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Errno("memfd_create");
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    absl::Status s = Errno(absl::StrCat("sizing the arena to ", bytes, " bytes"));
    close(fd);
    return s;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    absl::Status s = Errno("mapping the arena");
    close(fd);
    return s;
  }
  // After this, no one can resize the arena, map it writable, write() to it (even through a
  // reopened /proc/self/fd/N) or drop the seals; the mapping above keeps writing.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) !=
      0) {
    absl::Status s = errno == EINVAL
                         ? absl::FailedPreconditionError(
                               "this kernel has no F_SEAL_FUTURE_WRITE (Linux 5.1 or newer "
                               "needed): workers could write to the arena")
                         : Errno("sealing the arena");
    munmap(base, bytes);
    close(fd);
    return s;
  }
  return std::unique_ptr<FastArena>(new FastArena(fd, static_cast<char*>(base), bytes));
}

FastArena::FastArena(int fd, char* base, uint64_t size) : fd_(fd), base_(base), size_(size) {
  free_[0] = size;
}

FastArena::~FastArena() {
  munmap(base_, size_);
  close(fd_);
}

absl::StatusOr<FastArena::Placed> FastArena::Place(
    const std::shared_ptr<const Artifact>& artifact) {
  return PlaceBytes(KeyWithChecksum(artifact->meta), artifact->bytes);
}

FastArena::Placed FastArena::LeaseLocked(Slot& slot) {
  if (slot.leases++ == 0) {
    unleased_.erase(slot.lru);
    unleased_bytes_ -= slot.length;
  }
  ++leases_;
  return Placed{slot.id, slot.offset};
}

absl::StatusOr<FastArena::Placed> FastArena::LeaseExisting(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return absl::NotFoundError("no slot holds it now");
  return LeaseLocked(slots_[it->second]);
}

absl::StatusOr<FastArena::Placed> FastArena::PlaceBytes(std::string key, absl::string_view bytes) {
  absl::MutexLock lock(&mu_);
  if (auto it = by_key_.find(key); it != by_key_.end()) return LeaseLocked(slots_[it->second]);
  uint64_t length = SlotLength(bytes.size());
  uint64_t offset = 0;
  // Evicting cannot help when even every unleased slot freed would leave too little room.
  bool can_fit = size_ - in_use_ + unleased_bytes_ >= length;
  while (!AllocateLocked(length, &offset)) {
    if (!can_fit || unleased_.empty()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the fast-path arena has no room for ", bytes.size(), " bytes: ", in_use_,
                       " of ", size_, " bytes are in slots, ", leases_, " leases held"));
    }
    EvictLocked(unleased_.front());
  }
  Slot& slot = WriteSlotLocked(bytes, std::move(key), offset, length);
  slot.leases = 1;
  ++leases_;
  return Placed{slot.id, offset};
}

bool FastArena::Preload(const std::shared_ptr<const Artifact>& artifact) {
  std::string key = KeyWithChecksum(artifact->meta);
  uint64_t length = SlotLength(artifact->bytes.size());
  absl::MutexLock lock(&mu_);
  if (by_key_.contains(key)) return true;
  uint64_t offset = 0;
  if (!AllocateLocked(length, &offset)) return false;
  Slot& slot = WriteSlotLocked(artifact->bytes, std::move(key), offset, length);
  slot.lru = unleased_.insert(unleased_.end(), slot.id);
  unleased_bytes_ += length;
  return true;
}

FastArena::Slot& FastArena::WriteSlotLocked(absl::string_view bytes, std::string key,
                                            uint64_t offset, uint64_t length) {
  std::memcpy(base_ + offset, bytes.data(), bytes.size());
  std::memset(base_ + offset + bytes.size(), 0, length - bytes.size());
  Slot slot;
  slot.id = next_id_++;
  slot.key = key;
  slot.offset = offset;
  slot.length = length;
  in_use_ += length;
  by_key_[std::move(key)] = slot.id;
  return slots_.emplace(slot.id, std::move(slot)).first->second;
}

void FastArena::Release(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.leases == 0) return;
  --leases_;
  if (--it->second.leases == 0) {
    it->second.lru = unleased_.insert(unleased_.end(), id);
    unleased_bytes_ += it->second.length;
  }
}

uint64_t FastArena::bytes_in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

uint64_t FastArena::leases() const {
  absl::MutexLock lock(&mu_);
  return leases_;
}

bool FastArena::AllocateLocked(uint64_t length, uint64_t* offset) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < length) continue;
    *offset = it->first;
    uint64_t rest = it->second - length;
    free_.erase(it);
    if (rest > 0) free_[*offset + length] = rest;
    return true;
  }
  return false;
}

void FastArena::FreeLocked(uint64_t offset, uint64_t length) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + length == next->first) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += length;
      return;
    }
  }
  free_[offset] = length;
}

void FastArena::EvictLocked(uint64_t id) {
  auto it = slots_.find(id);
  if (it == slots_.end()) return;
  Slot& slot = it->second;
  unleased_.erase(slot.lru);
  unleased_bytes_ -= slot.length;
  by_key_.erase(slot.key);
  in_use_ -= slot.length;
  FreeLocked(slot.offset, slot.length);
  slots_.erase(it);
}

}  // namespace kcache
