#include "engine/objects/memo_object_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache::objects {
namespace {

// What a kept string costs beyond its characters (its header and the allocator's rounding).
constexpr uint64_t kStringOverhead = 48;

std::string ListingName(const KernelId& key1) { return absl::StrCat("L", key1.Bytes()); }
std::string BundleName(const ArtifactKey& key) { return absl::StrCat("G", key.Encode()); }

uint64_t ListingBytes(const std::vector<ObjectEntryMeta>& entries) {
  uint64_t bytes = 0;
  for (const ObjectEntryMeta& entry : entries) {
    bytes += entry.source.size() + entry.key.toolkit.size() + 4 * kStringOverhead;
    for (const auto& [path, digest] : entry.manifest) {
      bytes += path.size() + digest.size() + 2 * kStringOverhead;
    }
    for (const auto& [field, value] : entry.fields) {
      bytes += field.size() + value.size() + 2 * kStringOverhead;
    }
  }
  return bytes;
}

}  // namespace

MemoObjectCache::MemoObjectCache(std::unique_ptr<ObjectCache> inner, uint64_t max_bytes,
                                 std::function<void()> on_hit)
    : inner_(std::move(inner)), max_bytes_(max_bytes), on_hit_(std::move(on_hit)) {}

absl::StatusOr<std::vector<ObjectEntryMeta>> MemoObjectCache::List(const KernelId& key1) {
  std::string name = ListingName(key1);
  if (std::shared_ptr<const Value> held = Find(name)) {
    if (on_hit_) on_hit_();
    return std::get<std::vector<ObjectEntryMeta>>(*held);
  }
  uint64_t generation = Generation();
  absl::StatusOr<std::vector<ObjectEntryMeta>> entries = inner_->List(key1);
  if (entries.ok() && !entries->empty()) {
    if (uint64_t bytes = ListingBytes(*entries); Keeps(bytes)) {
      Keep(name, *entries, bytes, generation);
    }
  }
  return entries;
}

absl::StatusOr<std::string> MemoObjectCache::Get(const ArtifactKey& key) {
  std::string name = BundleName(key);
  if (std::shared_ptr<const Value> held = Find(name)) {
    if (on_hit_) on_hit_();
    inner_->RecordUse(key);  // the store's LRU bound sees what memory serves
    return std::get<std::string>(*held);
  }
  uint64_t generation = Generation();
  absl::StatusOr<std::string> bytes = inner_->Get(key);
  if (bytes.ok() && Keeps(bytes->size() + kStringOverhead)) {
    Keep(name, *bytes, bytes->size() + kStringOverhead, generation);
  }
  return bytes;
}

absl::Status MemoObjectCache::Put(const ObjectEntryMeta& entry, const std::string& bundle) {
  absl::Status put = inner_->Put(entry, bundle);
  Forget({ListingName(entry.key.kernel_id), BundleName(entry.key)});
  return put;
}

absl::Status MemoObjectCache::Delete(const ArtifactKey& key) {
  absl::Status deleted = inner_->Delete(key);
  Forget({ListingName(key.kernel_id), BundleName(key)});
  return deleted;
}

std::shared_ptr<const MemoObjectCache::Value> MemoObjectCache::Find(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(name);
  if (it == held_.end()) return nullptr;
  recency_.splice(recency_.begin(), recency_, it->second.recency);
  return it->second.value;
}

void MemoObjectCache::Keep(const std::string& name, Value value, uint64_t bytes,
                           uint64_t generation) {
  auto shared = std::make_shared<const Value>(std::move(value));
  absl::MutexLock lock(&mu_);
  if (generation != generation_) return;  // a Put or Delete ran meanwhile: maybe stale
  if (auto it = held_.find(name); it != held_.end()) Drop(it);
  while (bytes_.load(std::memory_order_relaxed) + bytes > max_bytes_ && !recency_.empty()) {
    Drop(held_.find(recency_.back()));
  }
  recency_.push_front(name);
  held_[name] = Held{std::move(shared), bytes, recency_.begin()};
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void MemoObjectCache::ForgetListing(const KernelId& key1) { Forget({ListingName(key1)}); }

void MemoObjectCache::Forget(std::initializer_list<std::string> names) {
  absl::MutexLock lock(&mu_);
  ++generation_;
  for (const std::string& name : names) {
    if (auto it = held_.find(name); it != held_.end()) Drop(it);
  }
}

void MemoObjectCache::Drop(absl::flat_hash_map<std::string, Held>::iterator it) {
  bytes_.fetch_sub(it->second.bytes, std::memory_order_relaxed);
  recency_.erase(it->second.recency);
  held_.erase(it);
}

uint64_t MemoObjectCache::Generation() {
  absl::MutexLock lock(&mu_);
  return generation_;
}

}  // namespace kcache::objects
