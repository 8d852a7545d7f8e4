#include "daemon/cache/memory_lru.h"

#include <utility>

namespace kcache {

bool MemoryLru::Insert(const MemoryKey& key, Answer entry) {
  if (entry.artifact == nullptr) return false;
  uint64_t bytes = entry.artifact->bytes.size();
  return lru_.Insert(key, std::move(entry), bytes);
}

bool MemoryLru::InsertIfCurrent(const MemoryKey& key, Answer entry, uint64_t epoch) {
  if (entry.artifact == nullptr) return false;
  uint64_t bytes = entry.artifact->bytes.size();
  return lru_.InsertIfCurrent(key, std::move(entry), bytes, epoch);
}

void MemoryLru::InvalidateKernel(const KernelId& id) {
  lru_.InvalidateIf([&id](const MemoryKey& key) { return key.id == id; });
}

}  // namespace kcache
