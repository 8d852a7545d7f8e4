// BoundedLru: a least-recently-used map bounded by the bytes its values stand for, with an
// invalidation epoch. The one memory tier of both halves of kcached: kernel answers
// (daemon/cache/memory_lru.h) and launcher listings and objects
// (daemon/objects/memo_object_cache.h) are adapters over it.
//
// The epoch closes the race of a reader that fills the cache from a slower tier while a writer
// changes that tier: the reader takes epoch() before reading, the writer invalidates after
// writing, and InsertIfCurrent keeps nothing once any invalidation ran in between.
#ifndef KCACHE_CORE_BOUNDED_LRU_H_
#define KCACHE_CORE_BOUNDED_LRU_H_

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <list>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace kcache {

struct BoundedLruStats {
  uint64_t bytes = 0;  // the bytes the held values stand for (their sum, as inserted)
  uint64_t entries = 0;
  uint64_t evictions = 0;      // entries dropped to stay within the bound, since creation
  uint64_t invalidations = 0;  // entries dropped by Invalidate/InvalidateIf, since creation
};

// Thread-safe (one mutex; every call is a hash lookup and a list splice, except InvalidateIf,
// which scans). `Value` is copied out by Find: hold large values behind a shared_ptr.
// `Key` must be hashable by absl::Hash.
template <typename Key, typename Value>
class BoundedLru {
 public:
  explicit BoundedLru(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  BoundedLru(const BoundedLru&) = delete;
  BoundedLru& operator=(const BoundedLru&) = delete;

  // The value under `key`, now the most recently used; nullopt when absent.
  std::optional<Value> Find(const Key& key) {
    absl::MutexLock lock(&mu_);
    auto found = index_.find(key);
    if (found == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, found->second);
    return found->second->value;
  }

  // A token for InsertIfCurrent, to take before reading what is to be inserted.
  uint64_t epoch() const {
    absl::MutexLock lock(&mu_);
    return epoch_;
  }

  // Inserts or replaces `key` with `value`, which stands for `bytes`, then evicts the least
  // recently used entries until the sum fits the bound. A value larger than the whole bound is
  // not kept (and the key's old value is dropped all the same). Returns whether it was kept.
  bool Insert(const Key& key, Value value, uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    return InsertLocked(key, std::move(value), bytes);
  }
  // As Insert, unless an invalidation ran since `epoch` was taken: then nothing changes and it
  // returns false.
  bool InsertIfCurrent(const Key& key, Value value, uint64_t bytes, uint64_t epoch) {
    absl::MutexLock lock(&mu_);
    if (epoch != epoch_) return false;
    return InsertLocked(key, std::move(value), bytes);
  }

  // Drops `keys` (those held) and starts a new epoch.
  void Invalidate(std::initializer_list<Key> keys) {
    absl::MutexLock lock(&mu_);
    ++epoch_;
    for (const Key& key : keys) {
      if (auto found = index_.find(key); found != index_.end()) {
        EraseLocked(found->second);
        ++invalidations_;
      }
    }
  }
  // Drops every entry whose key satisfies `pred` (called under the lock: it must not call
  // back into this cache) and starts a new epoch.
  template <typename Pred>
  void InvalidateIf(Pred pred) {
    absl::MutexLock lock(&mu_);
    ++epoch_;
    for (auto it = order_.begin(); it != order_.end();) {
      auto next = std::next(it);
      if (pred(it->key)) {
        EraseLocked(it);
        ++invalidations_;
      }
      it = next;
    }
  }

  BoundedLruStats Stats() const {
    absl::MutexLock lock(&mu_);
    return BoundedLruStats{bytes_, index_.size(), evictions_, invalidations_};
  }
  uint64_t capacity() const { return capacity_; }

 private:
  struct Node {
    Key key;
    Value value;
    uint64_t bytes = 0;
  };
  using Order = std::list<Node>;  // front: most recently used

  bool InsertLocked(const Key& key, Value value, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (auto found = index_.find(key); found != index_.end()) EraseLocked(found->second);
    if (bytes > capacity_) return false;
    while (bytes_ + bytes > capacity_ && !order_.empty()) {
      EraseLocked(std::prev(order_.end()));
      ++evictions_;
    }
    order_.push_front(Node{key, std::move(value), bytes});
    index_[key] = order_.begin();
    bytes_ += bytes;
    return true;
  }
  void EraseLocked(typename Order::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes_ -= it->bytes;
    index_.erase(it->key);
    order_.erase(it);
  }

  const uint64_t capacity_;
  mutable absl::Mutex mu_;
  Order order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, typename Order::iterator> index_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t invalidations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kcache

#endif  // KCACHE_CORE_BOUNDED_LRU_H_
