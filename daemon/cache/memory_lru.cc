#include "daemon/cache/memory_lru.h"

#include <utility>

namespace kcache {

std::optional<Answer> MemoryLru::Lookup(const MemoryKey& key) {
  absl::MutexLock lock(&mu_);
  auto found = index_.find(key);
  if (found == index_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, found->second);
  return found->second->entry;
}

uint64_t MemoryLru::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

bool MemoryLru::Insert(const MemoryKey& key, Answer entry) {
  absl::MutexLock lock(&mu_);
  return InsertLocked(key, std::move(entry));
}

bool MemoryLru::InsertIfCurrent(const MemoryKey& key, Answer entry, uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch != epoch_) return false;
  return InsertLocked(key, std::move(entry));
}

bool MemoryLru::InsertLocked(const MemoryKey& key, Answer entry) {
  if (entry.artifact == nullptr) return false;
  uint64_t bytes = entry.artifact->bytes.size();
  if (auto found = index_.find(key); found != index_.end()) EraseLocked(found->second);
  if (bytes > capacity_) return false;
  while (bytes_ + bytes > capacity_ && !order_.empty()) {
    EraseLocked(std::prev(order_.end()));
    ++evictions_;
  }
  order_.push_front(Node{key, std::move(entry), bytes});
  index_[key] = order_.begin();
  bytes_ += bytes;
  return true;
}

void MemoryLru::EraseLocked(Order::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  order_.erase(it);
}

void MemoryLru::InvalidateKernel(const KernelId& id) {
  absl::MutexLock lock(&mu_);
  ++epoch_;
  for (auto it = order_.begin(); it != order_.end();) {
    auto next = std::next(it);
    if (it->key.id == id) {
      EraseLocked(it);
      ++invalidations_;
    }
    it = next;
  }
}

MemoryLruStats MemoryLru::Stats() const {
  absl::MutexLock lock(&mu_);
  return MemoryLruStats{bytes_, index_.size(), evictions_, invalidations_};
}

}  // namespace kcache
