// Internal to engine/store: the RocksDB implementation of Store. rocks_store.cc holds reads
// and writes; store_open.cc how a store directory is opened (OpenStore); rocks_store_lru.cc the
// record of last use, eviction and the free-space check; store_repair.cc verification, repair
// and salvage. Callers see only store.h.
#ifndef KCACHE_ENGINE_STORE_ROCKS_STORE_H_
#define KCACHE_ENGINE_STORE_ROCKS_STORE_H_

#include <rocksdb/write_batch.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/store/rocks_db.h"
#include "engine/store/store.h"

namespace kcache::store_internal {

// Thread-safe. Lock order: write_mu_, then uses_mu_.
class RocksStore : public Store {
 public:
  // `read_only_full`: a writable store opened read-only because the disk was full.
  RocksStore(std::string path, StoreOptions options, std::unique_ptr<OpenDb> open,
             bool read_only_full, bool replaced);
  ~RocksStore() override;

  absl::StatusOr<Artifact> Get(const ArtifactKey& key) override;
  void RecordUse(const ArtifactKey& key) override;
  absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(const KernelId& id) override;
  absl::StatusOr<std::vector<ArtifactMeta>> ListAllArtifacts() override;
  absl::Status Put(const Artifact& artifact) override {
    return PutSynced(artifact.meta, artifact.bytes, nullptr, true);
  }
  absl::Status PutOwned(Artifact artifact) override {
    return PutSynced(artifact.meta, artifact.bytes, &artifact.bytes, true);
  }
  absl::Status PutCopy(const Artifact& artifact) override {
    return PutSynced(artifact.meta, artifact.bytes, nullptr, false);
  }
  absl::Status Delete(const ArtifactKey& key) override;
  absl::Status PutKernel(const KernelRecord& record) override;
  absl::StatusOr<KernelRecord> GetKernel(const KernelId& id) override;
  absl::StatusOr<std::vector<KernelRecord>> ListKernels() override;
  absl::StatusOr<StoreStats> Stats() override;
  absl::StatusOr<StoreVerifyReport> Verify() override;
  const std::string& path() const override { return path_; }

  // RepairStore's pass over an opened store (store_repair.cc): drops bad values, rebuilds
  // listings. Sets *unreadable when RocksDB could not read a family to its end.
  absl::Status RepairValues(StoreRepairReport* report, bool* unreadable);
  // Copies every kernel record and artifact of `from` that verifies into this store; returns
  // how many. Reads `from` key by key where its iterators fail.
  uint64_t CopyVerifiedFrom(RocksStore& from);

 private:
  // A value's place: its family (resolved to a handle under write_mu_, as the listing's handle
  // changes when it is rebuilt) and raw key.
  enum class Family { kArtifacts, kListing, kKernels };
  using Location = std::pair<Family, std::string>;
  struct Candidate;  // an entry eviction may delete (rocks_store_lru.cc)

  rocksdb::DB* db() const { return open_->db.get(); }
  // The listing family's handle now (it changes when RebuildListing replaces the family).
  // Readers may use it without a lock; writers load it under write_mu_.
  rocksdb::ColumnFamilyHandle* listing() const { return listing_.load(std::memory_order_acquire); }
  rocksdb::ColumnFamilyHandle* Handle(Family family) const;
  // Writes an artifact of `bytes`. `owned`, when set, is the string `bytes` views, freed as soon
  // as the write batch holds the value (or its compressed form is made), so that the bytes, the
  // value and RocksDB's copy of it are never all held at once.
  absl::Status PutSynced(const ArtifactMeta& artifact_meta, absl::string_view bytes,
                         std::string* owned, bool sync);
  static rocksdb::ReadOptions Reading();
  // For the small values (listing entries, kernel records): RocksDB's block checksums on, so
  // a damaged block is an error, never a silently shorter list.
  static rocksdb::ReadOptions Verifying();
  absl::Status CheckWritable() const;
  static absl::Status CheckKey(const ArtifactKey& key);
  // Writes a batch of `bytes` (for the free-space check); `sync` for durable writes.
  absl::Status Write(rocksdb::WriteBatch& batch, uint64_t bytes, bool sync, absl::string_view what);
  // ResourceExhausted (counted, reported) when fewer than min_free_bytes + bytes are free.
  absl::Status CheckRoom(uint64_t bytes, absl::string_view what);
  void Report(StoreEvent::Kind kind, std::string text) const;
  absl::Status DropCorrupt(absl::string_view what, const absl::Status& why,
                           const std::vector<Location>& locations);
  absl::StatusOr<KernelRecord> DecodeKernel(absl::string_view raw_key, absl::string_view value);
  // `may_rebuild`: a writable store whose listing is unreadable rebuilds it (once) and scans
  // again.
  absl::StatusOr<std::vector<ArtifactMeta>> ScanArtifacts(const std::string& prefix,
                                                          bool may_rebuild = true);
  // ListArtifacts when RocksDB cannot read the listing: the artifacts' own metadata, and the
  // listing entries rewritten from it.
  absl::StatusOr<std::vector<ArtifactMeta>> ScanArtifactValues(const std::string& prefix,
                                                               const rocksdb::Status& why);
  std::optional<ArtifactMeta> RepairListing(const std::string& raw_key);
  // A writable store whose listing RocksDB cannot read (a damaged SST block): replaces the
  // listing family `damaged` by a new one written from every artifact value that verifies,
  // so the damage is gone for every later reader (kcache doctor included) instead of worked
  // around on each scan. Nothing when another scan already replaced it. False when it could
  // not (no room, the artifacts unreadable): the old family stays.
  bool RebuildListing(rocksdb::ColumnFamilyHandle* damaged, const rocksdb::Status& why);
  // Calls fn(key, value) for every entry of `family`, in key order.
  template <typename Fn>
  absl::Status ForEach(rocksdb::ColumnFamilyHandle* family, Fn fn) {
    std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(Reading(), family));
    for (it->SeekToFirst(); it->Valid(); it->Next()) fn(View(it->key()), View(it->value()));
    if (it->status().ok()) return absl::OkStatus();
    return FromRocks(it->status(), absl::StrCat("reading ", family->GetName(), " of ", path_));
  }

  // rocks_store_lru.cc
  void FlushUses() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Recounts the store and, when it is above max_bytes, evicts down to 90% of it.
  void EvictIfOver() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::StatusOr<std::vector<Candidate>> Candidates(uint64_t* total)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void Added(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const std::string path_;
  const StoreOptions options_;
  const std::unique_ptr<OpenDb> open_;
  rocksdb::ColumnFamilyHandle* const artifacts_;
  std::atomic<rocksdb::ColumnFamilyHandle*> listing_;
  rocksdb::ColumnFamilyHandle* const kernels_;
  const bool read_only_full_;
  const bool replaced_;
  std::atomic<uint64_t> checksum_failures_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> evicted_bytes_{0};
  mutable std::atomic<uint64_t> writes_refused_full_{0};
  // A write failed for want of space: RocksDB stops writing until Resume().
  std::atomic<bool> needs_resume_{false};

  // Serializes writes of listing entries (Put, the batched last-use updates, eviction), so a
  // last-use update never rewrites a listing entry with metadata a Put just replaced.
  absl::Mutex write_mu_;
  // Bytes the store holds as far as this process knows (recounted by EvictIfOver); nullopt
  // until first counted.
  std::optional<uint64_t> tally_ ABSL_GUARDED_BY(write_mu_);

  absl::Mutex uses_mu_;
  // Raw artifact key -> last use (unix ms) not yet written to its listing entry.
  absl::flat_hash_map<std::string, int64_t> uses_ ABSL_GUARDED_BY(uses_mu_);
};

}  // namespace kcache::store_internal

#endif  // KCACHE_ENGINE_STORE_ROCKS_STORE_H_
