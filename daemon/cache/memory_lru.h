// MemoryLru: the memory tier. Maps (kernel id, device SM, driver) to the artifact that serves
// it, so a warm hit is one hash lookup and a shared_ptr copy: no store access, no payload copy.
#ifndef KCACHE_DAEMON_CACHE_MEMORY_LRU_H_
#define KCACHE_DAEMON_CACHE_MEMORY_LRU_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/answer.h"
#include "core/artifact.h"
#include "core/bounded_lru.h"
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

using MemoryLruStats = BoundedLruStats;

// The kernel answers' adapter over BoundedLru (core/bounded_lru.h): an answer stands for its
// artifact's payload bytes (an artifact under two keys counts twice). Thread-safe.
class MemoryLru {
 public:
  explicit MemoryLru(uint64_t capacity_bytes) : lru_(capacity_bytes) {}

  // The answer for `key` (now the most recently used), or nullopt. Its rule is the one it would
  // be served under from a store: never kCompiled.
  std::optional<Answer> Lookup(const MemoryKey& key) { return lru_.Find(key); }

  // A token to pass to InsertIfCurrent: taken before reading the stores, it lets an insert
  // notice that the kernel was invalidated while the stores were being read.
  uint64_t epoch() const { return lru_.epoch(); }

  // Inserts or replaces `key`, then evicts least recently used entries until the payload
  // bytes fit the bound. An answer with no artifact, or one larger than the whole bound, is
  // not kept. Returns false when it kept nothing.
  bool Insert(const MemoryKey& key, Answer entry);
  // As Insert, unless some kernel was invalidated since `epoch` was taken (the stores may
  // have changed under the reader): then nothing is inserted and it returns false.
  bool InsertIfCurrent(const MemoryKey& key, Answer entry, uint64_t epoch);

  // Drops every entry of kernel `id` (a new artifact of it was stored: the best answer for
  // some devices may have changed).
  void InvalidateKernel(const KernelId& id);

  MemoryLruStats Stats() const { return lru_.Stats(); }
  uint64_t capacity() const { return lru_.capacity(); }

 private:
  BoundedLru<MemoryKey, Answer> lru_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_MEMORY_LRU_H_
