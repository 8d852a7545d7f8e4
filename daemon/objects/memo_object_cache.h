// A bounded memory tier in front of kcached's object cache: the listing of a key1 and the
// bundle of an entry, once read from the stores (a read and a zstd decompression of ~1 MB of
// manifest and a few MB of object for a torch extension's compile), are answered from memory
// until evicted (least recently used first, within a byte budget) or changed.
//
// Never a stale answer: Put and Delete go through this cache and drop the key1's listing and
// the entry's bundle after the inner cache has changed, and an answer read from the inner
// cache while any Put or Delete ran is not kept (a generation count). An empty listing is not
// kept either, so the next lookup asks the stores again (a new entry there, or in the fleet
// tier, is seen at once). A bundle answered from memory is recorded as used in the stores
// (ObjectCache::RecordUse), so their LRU bound does not evict what is served most; what they
// evict all the same may still be served from here: the bytes are what that entry held.
#ifndef KCACHE_DAEMON_OBJECTS_MEMO_OBJECT_CACHE_H_
#define KCACHE_DAEMON_OBJECTS_MEMO_OBJECT_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/bounded_lru.h"
#include "engine/objects/object_cache.h"

namespace kcache::objects {

// Thread-safe when `inner` is. List and Get answer from memory after the first time; Put,
// Delete, ListAll and ListClientMade go to `inner` (Put and Delete then forget what they
// changed). `max_bytes` bounds the bytes held (strings of listings and bundles); an answer
// larger than a quarter of it is passed through and not kept. `on_hit`, when set, is called
// once for each answer from memory (kcached counts them).
class MemoObjectCache final : public ObjectCache {
 public:
  MemoObjectCache(std::unique_ptr<ObjectCache> inner, uint64_t max_bytes,
                  std::function<void()> on_hit = nullptr);

  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override;
  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override;
  absl::Status Put(const ObjectEntry& entry, std::string bundle) override;
  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override { return inner_->ListAll(); }
  absl::Status Delete(const ObjectEntryKey& key) override;
  void RecordUse(const ObjectEntryKey& key) override { inner_->RecordUse(key); }
  absl::StatusOr<ObjectPage> ListClientMade(const std::string& after) override {
    return inner_->ListClientMade(after);
  }

  // Drops key1's listing: entries were added under it beneath this cache (kcached's launcher
  // turns copy in an entry another kcached of the fleet compiled: compile_turns.h).
  void ForgetListing(const CommandKey& key1);

  // How many Puts and Deletes went through so far. An answer of List or Get taken while it
  // stayed the same is this cache's answer for as long as it still is (kcached's fast path
  // keeps answers in their wire form under it).
  uint64_t Generation() const { return held_.epoch(); }

  uint64_t bytes() const { return held_.Stats().bytes; }
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  using Value = std::variant<std::vector<ObjectEntry>, std::string>;

  // Whether an answer of `bytes` is kept at all (at most a quarter of the bound): checked
  // before the answer is copied.
  bool Keeps(uint64_t bytes) const { return bytes <= max_bytes_ / 4; }

  const std::unique_ptr<ObjectCache> inner_;
  const uint64_t max_bytes_;
  const std::function<void()> on_hit_;
  // Listings under "L<key1>", bundles under "G<entry key>"; epoch() is Generation().
  BoundedLru<std::string, std::shared_ptr<const Value>> held_;
};

}  // namespace kcache::objects

#endif  // KCACHE_DAEMON_OBJECTS_MEMO_OBJECT_CACHE_H_
