// The RocksDB store: the Store reads and writes (store_open.cc opens one).
// docs/store-format.md describes what is on disk.
#include "engine/store/rocks_store.h"

#include <rocksdb/db.h>
#include <rocksdb/metadata.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/store/value_format.h"

namespace kcache {
namespace store_internal {
namespace {

constexpr size_t kMaxKeyStringSize = 255;  // one length byte in the key

std::string KeyText(absl::string_view raw_key) {
  absl::StatusOr<ArtifactKey> key = ArtifactKey::Decode(raw_key);
  return key.ok() ? key->ToString() : "(undecodable key)";
}

// The exclusive upper bound of keys starting with `prefix` ("" for none).
std::string UpperBound(const std::string& prefix) {
  std::string upper = prefix;
  while (!upper.empty() && static_cast<uint8_t>(upper.back()) == 0xff) upper.pop_back();
  if (!upper.empty()) upper.back() = static_cast<char>(static_cast<uint8_t>(upper.back()) + 1);
  return upper;
}

}  // namespace

RocksStore::RocksStore(std::string path, StoreOptions options, std::unique_ptr<OpenDb> open,
                       bool read_only_full, bool replaced)
    : path_(std::move(path)),
      options_(std::move(options)),
      open_(std::move(open)),
      artifacts_(open_->Family(kArtifactsFamily)),
      listing_(open_->Family(kArtifactMetaFamily)),
      kernels_(open_->Family(kKernelsFamily)),
      read_only_full_(read_only_full),
      replaced_(replaced) {}

RocksStore::~RocksStore() {
  if (options_.read_only) return;
  absl::MutexLock lock(&write_mu_);
  FlushUses();
}

absl::StatusOr<Artifact> RocksStore::Get(const ArtifactKey& key) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  std::string raw_key = key.Encode();
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db()->Get(Reading(), artifacts_, raw_key, &value);
  if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat("no artifact ", key.ToString()));
  absl::StatusOr<Artifact> artifact = absl::DataLossError(s.ToString());
  if (s.ok()) {
    artifact = DecodeArtifactValue(View(value));
    if (artifact.ok() && artifact->meta.key.Encode() != raw_key) {
      artifact =
          absl::DataLossError(absl::StrCat("the value belongs to ", artifact->meta.key.ToString()));
    }
  } else if (!IsDamage(s)) {  // a vanished blob file is damage to this entry, not the store
    return FromRocks(s, absl::StrCat("reading ", key.ToString(), " from ", path_));
  }
  if (!artifact.ok()) {
    return DropCorrupt(absl::StrCat("artifact ", key.ToString()), artifact.status(),
                       {{Family::kArtifacts, raw_key}, {Family::kListing, raw_key}});
  }
  RecordUse(key);
  return artifact;
}

absl::StatusOr<std::vector<ArtifactMeta>> RocksStore::ListArtifacts(const KernelId& id) {
  return ScanArtifacts(ArtifactKey::KernelPrefix(id));
}

absl::StatusOr<std::vector<ArtifactMeta>> RocksStore::ListAllArtifacts() {
  return ScanArtifacts("");
}

absl::Status RocksStore::PutSynced(const ArtifactMeta& artifact_meta, absl::string_view bytes,
                                   std::string* owned, bool sync) {
  if (absl::Status s = CheckWritable(); !s.ok()) return s;
  const ArtifactKey& key = artifact_meta.key;
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  ArtifactMeta meta = artifact_meta;
  meta.size = bytes.size();
  meta.checksum = PayloadChecksum(bytes);
  if (meta.created_unix_ms == 0) meta.created_unix_ms = NowUnixMillis();
  if (meta.last_used_unix_ms == 0) meta.last_used_unix_ms = meta.created_unix_ms;
  std::string raw_key = key.Encode();
  ValueParts value = EncodeArtifactValueParts(meta, bytes, options_.zstd_level);
  auto release = [owned] {
    if (owned != nullptr) std::string().swap(*owned);
  };
  if (value.compressed != nullptr) release();  // the payload is the compressed copy
  absl::MutexLock lock(&write_mu_);
  rocksdb::WriteBatch batch;
  // The small listing value first: appended after the large one, it would grow the batch's
  // buffer (to twice its size) and copy it.
  batch.Put(listing(), raw_key, EncodeArtifactMetaValue(meta));
  rocksdb::Slice key_slice(raw_key);
  rocksdb::Slice value_slices[2] = {rocksdb::Slice(value.head),
                                    rocksdb::Slice(value.payload.data(), value.payload.size())};
  batch.Put(artifacts_, rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_slices, 2));
  release();  // the batch holds its copy; RocksDB's memtable makes one more while it writes
  value.compressed.reset();
  absl::Status s =
      Write(batch, batch.GetDataSize(), sync, absl::StrCat("writing ", key.ToString()));
  if (s.ok()) Added(meta.size);
  return s;
}

absl::Status RocksStore::Delete(const ArtifactKey& key) {
  if (absl::Status s = CheckWritable(); !s.ok()) return s;
  std::string raw_key = key.Encode();
  absl::MutexLock lock(&write_mu_);
  rocksdb::PinnableSlice listed;
  std::optional<uint64_t> size;
  if (db()->Get(Reading(), listing(), raw_key, &listed).ok()) {
    absl::StatusOr<ArtifactMeta> meta = DecodeArtifactMetaValue(View(listed));
    if (meta.ok()) size = meta->size;
  }
  rocksdb::WriteBatch batch;
  batch.Delete(artifacts_, raw_key);
  batch.Delete(listing(), raw_key);
  absl::Status s =
      Write(batch, batch.GetDataSize(), /*sync=*/true, absl::StrCat("deleting ", key.ToString()));
  if (s.ok() && tally_) {
    // An entry whose size is unknown (a bad listing) is recounted at the next write.
    if (size) {
      *tally_ -= std::min(*size, *tally_);
    } else {
      tally_.reset();
    }
  }
  return s;
}

absl::Status RocksStore::PutKernel(const KernelRecord& record) {
  if (absl::Status s = CheckWritable(); !s.ok()) return s;
  rocksdb::WriteBatch batch;
  std::string value = EncodeKernelValue(record, options_.zstd_level);
  batch.Put(kernels_, ToSlice(record.id.Bytes()), value);
  absl::MutexLock lock(&write_mu_);
  absl::Status s = Write(batch, batch.GetDataSize(), /*sync=*/true,
                         absl::StrCat("writing kernel ", record.id.ShortHex()));
  if (s.ok()) Added(value.size());
  return s;
}

absl::StatusOr<KernelRecord> RocksStore::GetKernel(const KernelId& id) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db()->Get(Reading(), kernels_, ToSlice(id.Bytes()), &value);
  if (s.IsNotFound()) {
    return absl::NotFoundError(absl::StrCat("kernel ", id.Hex(), " is not in the store"));
  }
  absl::StatusOr<KernelRecord> record = absl::DataLossError(s.ToString());
  if (s.ok()) {
    record = DecodeKernel(id.Bytes(), View(value));
  } else if (!IsDamage(s)) {
    return FromRocks(s, absl::StrCat("reading kernel ", id.Hex()));
  }
  if (!record.ok()) {
    return DropCorrupt(absl::StrCat("kernel record ", id.Hex()), record.status(),
                       {{Family::kKernels, std::string(id.Bytes())}});
  }
  return record;
}

absl::StatusOr<std::vector<KernelRecord>> RocksStore::ListKernels() {
  std::vector<KernelRecord> records;
  std::vector<std::pair<std::string, absl::Status>> bad;
  std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(Verifying(), kernels_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<KernelRecord> record = DecodeKernel(View(it->key()), View(it->value()));
    if (record.ok()) {
      records.push_back(*std::move(record));
    } else {
      bad.emplace_back(it->key().ToString(), record.status());
    }
  }
  rocksdb::Status status = it->status();
  it.reset();
  for (const auto& [key, why] : bad) {
    absl::StatusOr<KernelId> id = KernelId::FromBytes(key);
    DropCorrupt(absl::StrCat("kernel record ", id.ok() ? id->Hex() : "(undecodable id)"), why,
                {{Family::kKernels, key}})
        .IgnoreError();
  }
  if (!status.ok()) {
    if (!IsDamage(status)) return FromRocks(status, "listing kernels");
    // The records read so far are good; the rest are misses until a warm or request
    // registers them again (kcache doctor --repair rebuilds the store).
    checksum_failures_.fetch_add(1, std::memory_order_relaxed);
    Report(StoreEvent::Kind::kCorrupt,
           absl::StrCat("kernel records of ", path_, " unreadable past ", records.size(), ": ",
                        status.ToString(), "; listed what was readable"));
  }
  return records;
}

absl::StatusOr<StoreStats> RocksStore::Stats() {
  StoreStats stats;
  stats.format_version = kStoreFormatVersion;
  absl::StatusOr<std::vector<ArtifactMeta>> artifacts = ListAllArtifacts();
  if (!artifacts.ok()) return artifacts.status();
  stats.artifacts = artifacts->size();
  for (const ArtifactMeta& meta : *artifacts) stats.artifact_bytes += meta.size;
  std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(Reading(), kernels_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++stats.kernels;
  if (!it->status().ok() && !IsDamage(it->status())) {
    return FromRocks(it->status(), "counting kernels");
  }
  for (rocksdb::ColumnFamilyHandle* handle : open_->handles) {
    rocksdb::ColumnFamilyMetaData family;
    db()->GetColumnFamilyMetaData(handle, &family);
    stats.disk_bytes += family.size + family.blob_file_size;
  }
  stats.checksum_failures = checksum_failures_.load();
  stats.max_bytes = options_.read_only ? 0 : options_.max_bytes;
  stats.evictions = evictions_.load();
  stats.evicted_bytes = evicted_bytes_.load();
  stats.writes_refused_full = writes_refused_full_.load();
  stats.read_only_full = read_only_full_;
  stats.replaced_damaged = replaced_;
  return stats;
}

// Our own XXH3 checks every value; RocksDB's software CRC32c would cost ~15x more.
rocksdb::ReadOptions RocksStore::Reading() {
  rocksdb::ReadOptions read;
  read.verify_checksums = false;
  return read;
}

rocksdb::ReadOptions RocksStore::Verifying() { return rocksdb::ReadOptions(); }

absl::Status RocksStore::CheckWritable() const {
  if (read_only_full_) {
    writes_refused_full_.fetch_add(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(absl::StrCat(
        "the store at ", path_,
        " was opened read-only because its disk was full; it serves what it holds and "
        "stores nothing new until it is reopened with room (free space, then restart kcached)"));
  }
  if (!options_.read_only) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the store at ", path_, " was opened read-only; write to the daemon's writable store"));
}

// Keys whose toolkit id does not fit the key's length byte are never stored.
absl::Status RocksStore::CheckKey(const ArtifactKey& key) {
  if (key.toolkit.size() <= kMaxKeyStringSize) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("toolkit id of ", key.ToString(),
                                                 " is longer than ", kMaxKeyStringSize, " bytes"));
}

absl::Status RocksStore::Write(rocksdb::WriteBatch& batch, uint64_t bytes, bool sync,
                               absl::string_view what) {
  if (absl::Status s = CheckRoom(bytes, what); !s.ok()) return s;
  if (needs_resume_.load()) {
    // A write failed for want of space and RocksDB stopped writing; there is room again.
    rocksdb::Status resumed = db()->Resume();
    if (resumed.ok()) needs_resume_ = false;
  }
  rocksdb::WriteOptions write;
  write.sync = sync;
  rocksdb::Status s = db()->Write(write, &batch);
  if (s.ok()) return absl::OkStatus();
  if (s.IsNoSpace() || absl::StrContains(s.ToString(), "No space")) {
    needs_resume_ = true;
    writes_refused_full_.fetch_add(1, std::memory_order_relaxed);
    Report(StoreEvent::Kind::kDiskFull, absl::StrCat("the disk under ", path_, " is full: ", what,
                                                     " failed (", s.ToString(), "); reads go on"));
    return absl::ResourceExhaustedError(absl::StrCat(what, " to ", path_, ": the disk is full (",
                                                     s.ToString(),
                                                     "); nothing was stored, reads go on"));
  }
  return FromRocks(s, absl::StrCat(what, " to ", path_));
}

void RocksStore::Report(StoreEvent::Kind kind, std::string text) const {
  if (options_.on_event) options_.on_event(StoreEvent{kind, std::move(text)});
}

// Counts a value that did not verify, deletes it when writable, and returns the miss.
absl::Status RocksStore::DropCorrupt(absl::string_view what, const absl::Status& why,
                                     const std::vector<Location>& locations) {
  checksum_failures_.fetch_add(1, std::memory_order_relaxed);
  bool deleted = false;
  if (!options_.read_only && !read_only_full_) {
    absl::MutexLock lock(&write_mu_);
    rocksdb::WriteBatch batch;
    for (const auto& [family, key] : locations) batch.Delete(Handle(family), key);
    deleted = Write(batch, batch.GetDataSize(), /*sync=*/false, "deleting a corrupt value").ok();
  }
  std::string text = absl::StrCat(what, " was corrupt in the store at ", path_, " (", why.message(),
                                  "); ", deleted ? "it was deleted; " : "", "treated as a miss");
  Report(StoreEvent::Kind::kCorrupt, text);
  return absl::NotFoundError(text);
}

absl::StatusOr<KernelRecord> RocksStore::DecodeKernel(absl::string_view raw_key,
                                                      absl::string_view value) {
  absl::StatusOr<KernelRecord> record = DecodeKernelValue(value);
  if (record.ok() && record->id.Bytes() != raw_key) {
    return absl::DataLossError("the kernel record belongs to another kernel id");
  }
  return record;
}

// Metadata under the listing family for keys starting with `prefix` ("" = all). A listing
// entry that does not verify is counted and rebuilt from the artifact value when that one
// verifies; otherwise it is skipped (and dropped when writable).
absl::StatusOr<std::vector<ArtifactMeta>> RocksStore::ScanArtifacts(const std::string& prefix,
                                                                    bool may_rebuild) {
  std::string upper = UpperBound(prefix);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read = Verifying();
  if (!upper.empty()) read.iterate_upper_bound = &upper_slice;

  std::vector<ArtifactMeta> metas;
  std::vector<std::string> bad;
  rocksdb::ColumnFamilyHandle* listing_family = listing();
  std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(read, listing_family));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    absl::StatusOr<ArtifactMeta> meta = DecodeArtifactMetaValue(View(it->value()));
    if (meta.ok() && meta->key.Encode() == View(it->key())) {
      metas.push_back(*std::move(meta));
    } else {
      bad.push_back(it->key().ToString());
    }
  }
  rocksdb::Status status = it->status();
  it.reset();
  if (!status.ok()) {
    if (!IsDamage(status)) return FromRocks(status, "listing artifacts");
    bool writable = !options_.read_only && !read_only_full_;
    if (may_rebuild && writable && RebuildListing(listing_family, status)) {
      return ScanArtifacts(prefix, /*may_rebuild=*/false);
    }
    return ScanArtifactValues(prefix, status);
  }
  for (const std::string& raw_key : bad) {
    if (std::optional<ArtifactMeta> meta = RepairListing(raw_key)) metas.push_back(*meta);
  }
  return metas;
}

absl::StatusOr<std::vector<ArtifactMeta>> RocksStore::ScanArtifactValues(
    const std::string& prefix, const rocksdb::Status& why) {
  checksum_failures_.fetch_add(1, std::memory_order_relaxed);
  std::string upper = UpperBound(prefix);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read = Reading();
  if (!upper.empty()) read.iterate_upper_bound = &upper_slice;
  std::vector<ArtifactMeta> metas;
  std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(read, artifacts_));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    absl::StatusOr<Artifact> artifact = DecodeArtifactValue(View(it->value()));
    if (!artifact.ok() || artifact->meta.key.Encode() != View(it->key())) continue;
    metas.push_back(std::move(artifact->meta));
  }
  rocksdb::Status status = it->status();
  it.reset();
  Report(StoreEvent::Kind::kCorrupt,
         absl::StrCat("the listing of ", prefix.empty() ? "all artifacts" : KeyText(prefix + '\1'),
                      " in ", path_, " is unreadable (", why.ToString(), "); listed ", metas.size(),
                      " artifacts from their values; ",
                      options_.read_only ? "a read-only store: rebuild its image"
                                         : "`kcache doctor --repair` rebuilds the store"));
  if (!status.ok() && metas.empty()) {
    return FromRocks(status, absl::StrCat("listing artifacts of ", path_));
  }
  return metas;
}

std::optional<ArtifactMeta> RocksStore::RepairListing(const std::string& raw_key) {
  checksum_failures_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<ArtifactKey> key = ArtifactKey::Decode(raw_key);
  absl::StatusOr<Artifact> artifact =
      key.ok() ? Get(*key) : absl::StatusOr<Artifact>(absl::NotFoundError(""));
  bool writable = !options_.read_only && !read_only_full_;
  if (writable && (artifact.ok() || absl::IsNotFound(artifact.status()))) {
    absl::MutexLock lock(&write_mu_);
    rocksdb::WriteBatch batch;
    if (artifact.ok()) {
      batch.Put(listing(), raw_key, EncodeArtifactMetaValue(artifact->meta));
    } else {
      batch.Delete(listing(), raw_key);
      batch.Delete(artifacts_, raw_key);
    }
    Write(batch, batch.GetDataSize(), /*sync=*/false, "repairing an artifact listing entry")
        .IgnoreError();
  }
  Report(StoreEvent::Kind::kCorrupt,
         absl::StrCat("listing entry of ", KeyText(raw_key), " in ", path_, " was corrupt; ",
                      artifact.ok() ? "rebuilt from its artifact" : "dropped"));
  if (!artifact.ok()) return std::nullopt;
  return artifact->meta;
}

rocksdb::ColumnFamilyHandle* RocksStore::Handle(Family family) const {
  switch (family) {
    case Family::kArtifacts:
      return artifacts_;
    case Family::kListing:
      return listing();
    case Family::kKernels:
      return kernels_;
  }
  return nullptr;
}

bool RocksStore::RebuildListing(rocksdb::ColumnFamilyHandle* damaged, const rocksdb::Status& why) {
  checksum_failures_.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&write_mu_);       // no listing write between the scan and the swap
  if (listing() != damaged) return true;  // another scan rebuilt it meanwhile
  std::vector<std::pair<std::string, std::string>> entries;
  uint64_t bytes = 0;
  std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(Reading(), artifacts_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<Artifact> artifact = DecodeArtifactValue(View(it->value()));
    if (!artifact.ok() || artifact->meta.key.Encode() != View(it->key())) continue;
    entries.emplace_back(it->key().ToString(), EncodeArtifactMetaValue(artifact->meta));
    bytes += entries.back().first.size() + entries.back().second.size();
  }
  rocksdb::Status scanned = it->status();
  it.reset();
  std::string what =
      absl::StrCat("the listing of ", path_, " is unreadable (", why.ToString(), ")");
  if (!scanned.ok() || !CheckRoom(bytes, "rebuilding the listing").ok()) {
    Report(StoreEvent::Kind::kCorrupt,
           absl::StrCat(what, "; it could not be rebuilt in place (",
                        scanned.ok() ? "no room" : scanned.ToString(),
                        "); `kcache doctor --repair` rebuilds the store"));
    return false;
  }
  rocksdb::ColumnFamilyHandle* fresh = nullptr;
  rocksdb::Status s = db()->DropColumnFamily(damaged);
  if (s.ok()) {
    s = db()->CreateColumnFamily(FamilyOptions(kArtifactMetaFamily, options_), kArtifactMetaFamily,
                                 &fresh);
  }
  if (!s.ok()) {  // a dropped listing without a new one: the next open salvages the store
    Report(StoreEvent::Kind::kCorrupt,
           absl::StrCat(what, "; replacing it failed (", s.ToString(), ")"));
    return false;
  }
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : entries) batch.Put(fresh, key, value);
  absl::Status written = Write(batch, bytes, /*sync=*/true, "rebuilding the listing");
  std::replace(open_->handles.begin(), open_->handles.end(), damaged, fresh);
  open_->retired.push_back(damaged);
  listing_.store(fresh, std::memory_order_release);
  Report(StoreEvent::Kind::kCorrupt,
         absl::StrCat(what, "; rebuilt it from ", entries.size(), " artifacts that verify",
                      written.ok() ? ""
                                   : absl::StrCat(", but writing it failed: ", written.message(),
                                                  " (their next Put lists them again)")));
  return true;
}

}  // namespace store_internal
}  // namespace kcache
