// The writable store's bound: the record of last use (batched), least-recently-used eviction
// and the free-space check in front of every write. docs/store-format.md, "Bound and eviction".
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/store/rocks_store.h"
#include "engine/store/value_format.h"

namespace kcache::store_internal {
namespace {

// Last uses kept in memory before they are written to the listing entries in one batch.
constexpr size_t kUsesPerBatch = 1024;
// Past this many unwritten uses (writes blocked), new keys are not recorded.
constexpr size_t kMaxPendingUses = 65536;
// Eviction needs the order of use only roughly: a listing entry is rewritten only when its
// recorded last use is older than this.
constexpr int64_t kUseGranularityMs = 60 * 1000;

}  // namespace

struct RocksStore::Candidate {
  int64_t last_used_unix_ms = 0;
  uint64_t bytes = 0;
  bool kernel = false;  // a kernel record (key: its id) rather than an artifact
  std::string key;      // raw key
};

void RocksStore::RecordUse(const ArtifactKey& key) {
  if (options_.read_only || read_only_full_) return;
  int64_t now = NowUnixMillis();
  {
    absl::MutexLock lock(&uses_mu_);
    std::string raw = key.Encode();
    auto it = uses_.find(raw);
    if (it != uses_.end()) {
      it->second = now;
      return;
    }
    if (uses_.size() >= kMaxPendingUses) return;
    uses_.emplace(std::move(raw), now);
    if (uses_.size() < kUsesPerBatch) return;
  }
  // A full batch: write it, unless a Put holds the lock (the next use tries again).
  if (!write_mu_.TryLock()) return;
  FlushUses();
  write_mu_.Unlock();
}

void RocksStore::FlushUses() {
  absl::flat_hash_map<std::string, int64_t> uses;
  {
    absl::MutexLock lock(&uses_mu_);
    uses.swap(uses_);
  }
  if (uses.empty()) return;
  rocksdb::WriteBatch batch;
  for (const auto& [raw_key, used] : uses) {
    rocksdb::PinnableSlice value;
    if (!db()->Get(Reading(), listing(), raw_key, &value).ok()) continue;  // gone
    absl::StatusOr<ArtifactMeta> meta = DecodeArtifactMetaValue(View(value));
    // A bad entry is repaired by the next listing; a recent one needs no rewrite.
    if (!meta.ok() || used - meta->last_used_unix_ms < kUseGranularityMs) continue;
    meta->last_used_unix_ms = used;
    batch.Put(listing(), raw_key, EncodeArtifactMetaValue(*meta));
  }
  if (batch.Count() == 0) return;
  // Not synced: a lost batch only makes its artifacts look a little older.
  Write(batch, batch.GetDataSize(), /*sync=*/false, "recording last use").IgnoreError();
}

void RocksStore::Added(uint64_t bytes) {
  if (options_.max_bytes == 0) return;
  if (tally_) *tally_ += bytes;
  if (!tally_ || *tally_ > options_.max_bytes) EvictIfOver();
}

absl::StatusOr<std::vector<RocksStore::Candidate>> RocksStore::Candidates(uint64_t* total) {
  std::vector<Candidate> out;
  *total = 0;
  absl::flat_hash_map<std::string, bool> kernels_with_artifacts;
  absl::Status listed = ForEach(listing(), [&](absl::string_view key, absl::string_view value) {
    absl::StatusOr<ArtifactMeta> meta = DecodeArtifactMetaValue(value);
    if (!meta.ok()) return;  // repaired (or dropped) by the next listing
    *total += meta->size;
    kernels_with_artifacts[meta->key.kernel_id.Bytes()] = true;
    out.push_back(Candidate{meta->last_used_unix_ms, meta->size, false, std::string(key)});
  });
  if (!listed.ok()) return listed;
  absl::Status kernels = ForEach(kernels_, [&](absl::string_view key, absl::string_view value) {
    *total += value.size();
    if (kernels_with_artifacts.contains(key)) return;  // kept while its artifacts are
    absl::StatusOr<KernelRecord> record = DecodeKernelValue(value);
    int64_t registered = record.ok() ? record->registered_unix_ms : 0;
    out.push_back(Candidate{registered, value.size(), true, std::string(key)});
  });
  if (!kernels.ok()) return kernels;
  return out;
}

void RocksStore::EvictIfOver() {
  FlushUses();
  uint64_t total = 0;
  absl::StatusOr<std::vector<Candidate>> candidates = Candidates(&total);
  if (!candidates.ok()) return;  // unreadable: left to the next Put (and to repair)
  tally_ = total;
  if (total <= options_.max_bytes) return;
  uint64_t target = options_.max_bytes / 10 * 9;
  std::sort(candidates->begin(), candidates->end(), [](const Candidate& a, const Candidate& b) {
    return a.last_used_unix_ms < b.last_used_unix_ms;
  });
  rocksdb::WriteBatch batch;
  uint64_t count = 0, bytes = 0;
  for (const Candidate& c : *candidates) {
    if (total <= target) break;
    if (c.kernel) {
      batch.Delete(kernels_, c.key);
    } else {
      batch.Delete(artifacts_, c.key);
      batch.Delete(listing(), c.key);
    }
    total -= c.bytes;
    bytes += c.bytes;
    ++count;
  }
  // Deleting frees space only after compaction, so no free-space check stands in its way.
  rocksdb::WriteOptions write;
  rocksdb::Status s = db()->Write(write, &batch);
  if (!s.ok()) return;
  tally_ = total;
  evictions_.fetch_add(count, std::memory_order_relaxed);
  evicted_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  Report(
      StoreEvent::Kind::kEvicted,
      absl::StrCat("evicted ", count, " least recently used entries (", bytes >> 10, " KiB) from ",
                   path_, " to stay within its bound of ", options_.max_bytes >> 20, " MiB"));
}

absl::Status RocksStore::CheckRoom(uint64_t bytes, absl::string_view what) {
  std::optional<uint64_t> free = FreeBytes(options_.env, path_);
  if (!free || *free >= options_.min_free_bytes + bytes) return absl::OkStatus();
  writes_refused_full_.fetch_add(1, std::memory_order_relaxed);
  std::string text =
      absl::StrCat("the disk under ", path_, " is full: ", *free >> 20, " MiB free, ",
                   options_.min_free_bytes >> 20, " MiB kept free; ", what,
                   " was refused (reads go on; free space or lower --store-max-bytes)");
  Report(StoreEvent::Kind::kDiskFull, text);
  return absl::ResourceExhaustedError(text);
}

}  // namespace kcache::store_internal
