#include "daemon/objects/memo_object_cache.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache::objects {
namespace {

// What a kept string costs beyond its characters (its header and the allocator's rounding).
constexpr uint64_t kStringOverhead = 48;

std::string ListingName(const CommandKey& key1) { return absl::StrCat("L", key1.Bytes()); }
std::string BundleName(const ObjectEntryKey& key) {
  return absl::StrCat("G", key.command.Bytes(), key.entry_id);
}

uint64_t ListingBytes(const std::vector<ObjectEntry>& entries) {
  uint64_t bytes = 0;
  for (const ObjectEntry& entry : entries) {
    bytes += entry.source.size() + entry.key.entry_id.size() + 4 * kStringOverhead;
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
    : inner_(std::move(inner)),
      max_bytes_(max_bytes),
      on_hit_(std::move(on_hit)),
      held_(max_bytes) {}

absl::StatusOr<std::vector<ObjectEntry>> MemoObjectCache::List(const CommandKey& key1) {
  std::string name = ListingName(key1);
  if (std::optional<std::shared_ptr<const Value>> held = held_.Find(name)) {
    if (on_hit_) on_hit_();
    return std::get<std::vector<ObjectEntry>>(**held);
  }
  uint64_t generation = held_.epoch();
  absl::StatusOr<std::vector<ObjectEntry>> entries = inner_->List(key1);
  if (entries.ok() && !entries->empty()) {
    if (uint64_t bytes = ListingBytes(*entries); Keeps(bytes)) {
      held_.InsertIfCurrent(name, std::make_shared<const Value>(*entries), bytes, generation);
    }
  }
  return entries;
}

absl::StatusOr<std::string> MemoObjectCache::Get(const ObjectEntryKey& key) {
  std::string name = BundleName(key);
  if (std::optional<std::shared_ptr<const Value>> held = held_.Find(name)) {
    if (on_hit_) on_hit_();
    inner_->RecordUse(key);  // the store's LRU bound sees what memory serves
    return std::get<std::string>(**held);
  }
  uint64_t generation = held_.epoch();
  absl::StatusOr<std::string> bytes = inner_->Get(key);
  if (bytes.ok() && Keeps(bytes->size() + kStringOverhead)) {
    held_.InsertIfCurrent(name, std::make_shared<const Value>(*bytes),
                          bytes->size() + kStringOverhead, generation);
  }
  return bytes;
}

absl::Status MemoObjectCache::Put(const ObjectEntry& entry, std::string bundle) {
  absl::Status put = inner_->Put(entry, std::move(bundle));
  held_.Invalidate({ListingName(entry.key.command), BundleName(entry.key)});
  return put;
}

absl::Status MemoObjectCache::Delete(const ObjectEntryKey& key) {
  absl::Status deleted = inner_->Delete(key);
  held_.Invalidate({ListingName(key.command), BundleName(key)});
  return deleted;
}

void MemoObjectCache::ForgetListing(const CommandKey& key1) {
  held_.Invalidate({ListingName(key1)});
}

}  // namespace kcache::objects
