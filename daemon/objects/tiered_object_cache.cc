#include "daemon/objects/tiered_object_cache.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/objects/store_object_cache.h"

namespace kcache::objects {
namespace {

class TieredObjectCache final : public ObjectCache {
 public:
  TieredObjectCache(Store* local, std::vector<Store*> baked, uint64_t max_object_bytes)
      : max_object_bytes_(max_object_bytes) {
    for (Store* store : baked) caches_.push_back(NewStoreObjectCache(store));
    caches_.push_back(NewStoreObjectCache(local));  // last: asked after the baked stores
  }

  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override {
    return Merge([&](ObjectCache& cache) { return cache.List(key1); });
  }

  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override {
    return Merge([](ObjectCache& cache) { return cache.ListAll(); });
  }

  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    for (auto& cache : caches_) {
      absl::StatusOr<std::string> bytes = cache->Get(key);
      if (bytes.ok()) return bytes;
    }
    return absl::NotFoundError(absl::StrCat("no object ", key.ToString()));
  }

  absl::Status Put(const ObjectEntry& entry, std::string bundle) override {
    if (absl::Status sized = CheckObjectBytes(bundle.size(), max_object_bytes_); !sized.ok()) {
      return sized;
    }
    for (size_t i = 0; i + 1 < caches_.size(); ++i) {
      if (caches_[i]->Get(entry.key).ok()) {
        return absl::AlreadyExistsError(
            absl::StrCat("object ", entry.key.ToString(), " is in a baked store"));
      }
    }
    return caches_.back()->Put(entry, std::move(bundle));
  }

  // The writable store's entry only: a baked store's stays (it is read-only).
  absl::Status Delete(const ObjectEntryKey& key) override { return caches_.back()->Delete(key); }

  // The writable store's, the one with a bound (a key it does not hold is passed over there).
  void RecordUse(const ObjectEntryKey& key) override { caches_.back()->RecordUse(key); }

  // Client-made: the writable store's.
  absl::StatusOr<ObjectPage> ListClientMade(const std::string& after) override {
    return caches_.back()->ListClientMade(after);
  }

 private:
  // Entries of every store, each key once (the first store's, a baked one before the local).
  template <typename ListFn>
  absl::StatusOr<std::vector<ObjectEntry>> Merge(ListFn list) {
    std::vector<ObjectEntry> merged;
    std::set<ObjectEntryKey> seen;
    for (auto& cache : caches_) {
      absl::StatusOr<std::vector<ObjectEntry>> entries = list(*cache);
      if (!entries.ok()) continue;
      for (ObjectEntry& entry : *entries) {
        if (seen.insert(entry.key).second) merged.push_back(std::move(entry));
      }
    }
    return merged;
  }

  const uint64_t max_object_bytes_;
  std::vector<std::unique_ptr<ObjectCache>> caches_;  // baked stores, then the local one
};

}  // namespace

std::unique_ptr<ObjectCache> NewTieredObjectCache(Store* local, std::vector<Store*> baked,
                                                  uint64_t max_object_bytes) {
  return std::make_unique<TieredObjectCache>(local, std::move(baked), max_object_bytes);
}

}  // namespace kcache::objects
