// The object cache over a store.
#include "engine/objects/store_object_cache.h"

#include <utility>

#include "engine/objects/object_page.h"
#include "engine/objects/object_schema.h"

namespace kcache::objects {
namespace {

class StoreObjectCache final : public ObjectCache {
 public:
  explicit StoreObjectCache(Store* store) : store_(store) {}
  explicit StoreObjectCache(std::unique_ptr<Store> owned)
      : store_(owned.get()), owned_(std::move(owned)) {}

  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override {
    absl::StatusOr<std::vector<ArtifactMeta>> metas = store_->ListArtifacts(ObjectStoreId(key1));
    if (!metas.ok()) return metas.status();
    return ObjectEntriesOf(*metas);
  }

  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    absl::StatusOr<Artifact> artifact = store_->Get(ObjectStoreKey(key));
    if (!artifact.ok()) return artifact.status();
    return std::move(artifact->bytes);
  }

  absl::Status Put(const ObjectEntry& entry, std::string bundle) override {
    // Handed over, so that the store frees the bytes once it has encoded them.
    return store_->PutOwned(ArtifactFromObjectEntry(entry, std::move(bundle)));
  }

  absl::Status Delete(const ObjectEntryKey& key) override {
    return store_->Delete(ObjectStoreKey(key));
  }

  void RecordUse(const ObjectEntryKey& key) override { store_->RecordUse(ObjectStoreKey(key)); }

  absl::StatusOr<ObjectPage> ListClientMade(const std::string& after) override {
    absl::StatusOr<std::vector<ObjectEntry>> all = ListAll();
    if (!all.ok()) return all.status();
    return PageOfEntries(*std::move(all), after, kObjectPageBytes);
  }

  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override {
    absl::StatusOr<std::vector<ArtifactMeta>> metas = store_->ListAllArtifacts();
    if (!metas.ok()) return metas.status();
    return ObjectEntriesOf(*metas);
  }

 private:
  Store* store_;
  std::unique_ptr<Store> owned_;  // null when borrowed
};

}  // namespace

std::unique_ptr<ObjectCache> NewStoreObjectCache(Store* store) {
  return std::make_unique<StoreObjectCache>(store);
}

std::unique_ptr<ObjectCache> NewOwningStoreObjectCache(std::unique_ptr<Store> store) {
  return std::make_unique<StoreObjectCache>(std::move(store));
}

}  // namespace kcache::objects
