// MemoryLru: the memory tier. Maps (kernel id, device SM, driver) to the artifact that serves
// it, so a warm hit is one hash lookup and a shared_ptr copy: no store access, no payload copy.
#ifndef KCACHE_DAEMON_CACHE_MEMORY_LRU_H_
#define KCACHE_DAEMON_CACHE_MEMORY_LRU_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core/answer.h"
#include "core/artifact.h"
#include "core/compat.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache {

// What a request is answered by: the kernel and the device it runs on.
struct MemoryKey {
  KernelId id;
  Sm sm;
  uint32_t driver = 0;

  bool operator==(const MemoryKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const MemoryKey& key) {
    return H::combine(std::move(h), key.id.Bytes(), key.sm.major, key.sm.minor, key.driver);
  }
};

struct MemoryLruStats {
  uint64_t bytes = 0;  // payload bytes held (an artifact under two keys counts twice)
  uint64_t entries = 0;
  uint64_t evictions = 0;      // entries dropped to stay within the bound, since creation
  uint64_t invalidations = 0;  // entries dropped by InvalidateKernel, since creation
};

// Least-recently-used map bounded by payload bytes. Thread-safe (one mutex; every operation
// is a hash lookup plus a list splice, except InvalidateKernel, which scans).
class MemoryLru {
 public:
  explicit MemoryLru(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  MemoryLru(const MemoryLru&) = delete;
  MemoryLru& operator=(const MemoryLru&) = delete;

  // The answer for `key` (now the most recently used), or nullopt. Its rule is the one it would
  // be served under from a store: never kCompiled.
  std::optional<Answer> Lookup(const MemoryKey& key);

  // A token to pass to InsertIfCurrent: taken before reading the stores, it lets an insert
  // notice that the kernel was invalidated while the stores were being read.
  uint64_t epoch() const;

  // Inserts or replaces `key`, then evicts least recently used entries until the payload
  // bytes fit the bound. An artifact larger than the whole bound is not kept. Returns false
  // when it kept nothing.
  bool Insert(const MemoryKey& key, Answer entry);
  // As Insert, unless some kernel was invalidated since `epoch` was taken (the stores may
  // have changed under the reader): then nothing is inserted and it returns false.
  bool InsertIfCurrent(const MemoryKey& key, Answer entry, uint64_t epoch);

  // Drops every entry of kernel `id` (a new artifact of it was stored: the best answer for
  // some devices may have changed).
  void InvalidateKernel(const KernelId& id);

  MemoryLruStats Stats() const;
  uint64_t capacity() const { return capacity_; }

 private:
  struct Node {
    MemoryKey key;
    Answer entry;
    uint64_t bytes = 0;
  };
  using Order = std::list<Node>;  // front: most recently used

  bool InsertLocked(const MemoryKey& key, Answer entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(Order::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t capacity_;
  mutable absl::Mutex mu_;
  Order order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<MemoryKey, Order::iterator> index_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t invalidations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_MEMORY_LRU_H_
