// The RocksDB store: column families, open/create rules and the Store methods.
// docs/store-format.md describes what is on disk.
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/metadata.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/store/store.h"
#include "engine/store/value_format.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;

// Read-only opens need a positive max_open_files: with -1, a compacted store with blob
// files answers NotFound (facebook/rocksdb#12503).
constexpr int kReadOnlyMaxOpenFiles = 1000;
constexpr size_t kMaxKeyStringSize = 255;  // one length byte in the key

const std::vector<std::string>& RequiredFamilies() {
  static const auto* families =
      new std::vector<std::string>{rocksdb::kDefaultColumnFamilyName, kArtifactsFamily,
                                   kArtifactMetaFamily, kKernelsFamily, kMetaFamily};
  return *families;
}

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(message);
  if (s.IsIOError() && absl::StrContains(s.ToString(), "lock")) {
    return absl::FailedPreconditionError(
        absl::StrCat(message,
                     "; another kcached or kcache warm (or this process) has it "
                     "open for writing"));
  }
  if (s.IsIOError() || s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

absl::string_view View(const rocksdb::Slice& slice) { return {slice.data(), slice.size()}; }
rocksdb::Slice ToSlice(absl::string_view view) { return {view.data(), view.size()}; }

rocksdb::CompressionType MetadataCompression() {
  std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  bool zstd = std::find(supported.begin(), supported.end(), rocksdb::kZSTD) != supported.end();
  return zstd ? rocksdb::kZSTD : rocksdb::kNoCompression;
}

rocksdb::ColumnFamilyOptions FamilyOptions(const std::string& name, const StoreOptions& options) {
  rocksdb::ColumnFamilyOptions cf;
  cf.compression = rocksdb::kNoCompression;  // artifact and kernel values carry their own zstd
  if (name == kArtifactsFamily) {
    cf.enable_blob_files = true;
    cf.min_blob_size = options.min_blob_size;
    cf.blob_compression_type = rocksdb::kNoCompression;
    cf.enable_blob_garbage_collection = true;  // reclaims replaced and deleted artifacts
  } else if (name == kArtifactMetaFamily) {
    cf.compression = MetadataCompression();  // many small, similar values: compress blocks
  }
  return cf;
}

rocksdb::DBOptions BaseDbOptions(const StoreOptions& options) {
  rocksdb::DBOptions db;
  db.keep_log_file_num = 3;
  db.max_log_file_size = 4 << 20;
  if (options.read_only) db.max_open_files = kReadOnlyMaxOpenFiles;
  return db;
}

// An open RocksDB with its column family handles, closed (after a flush when writable) on
// destruction.
struct OpenDb {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  bool read_only = true;

  OpenDb() = default;
  OpenDb(const OpenDb&) = delete;
  OpenDb& operator=(const OpenDb&) = delete;
  ~OpenDb() {
    if (db == nullptr) return;
    if (!read_only) db->Flush(rocksdb::FlushOptions(), handles).PermitUncheckedError();
    for (rocksdb::ColumnFamilyHandle* handle : handles) {
      db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
    }
    db->Close().PermitUncheckedError();
  }
  rocksdb::ColumnFamilyHandle* Family(absl::string_view name) const {
    for (rocksdb::ColumnFamilyHandle* handle : handles) {
      if (handle->GetName() == name) return handle;
    }
    return nullptr;
  }
};

absl::StatusOr<std::unique_ptr<OpenDb>> OpenFamilies(const std::string& path,
                                                     const rocksdb::DBOptions& db_options,
                                                     const std::vector<std::string>& families,
                                                     const StoreOptions& options) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : families) {
    descriptors.emplace_back(name, FamilyOptions(name, options));
  }
  auto open = std::make_unique<OpenDb>();
  open->read_only = options.read_only;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      options.read_only
          ? rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &open->handles, &db)
          : rocksdb::DB::Open(db_options, path, descriptors, &open->handles, &db);
  if (!s.ok()) return FromRocks(s, absl::StrCat("cannot open the kcache store at ", path));
  open->db.reset(db);
  return open;
}

absl::StatusOr<uint32_t> ReadFormatVersion(const OpenDb& open, const std::string& path) {
  std::string value;
  rocksdb::Status s =
      open.db->Get(rocksdb::ReadOptions(), open.Family(kMetaFamily), kFormatVersionKey, &value);
  if (s.IsNotFound()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " is not a kcache store: its 'meta' column family holds no format version (was "
        "its creation interrupted?); remove the directory or pick another"));
  }
  if (!s.ok()) return FromRocks(s, absl::StrCat("cannot read the format of ", path));
  absl::StatusOr<uint32_t> version = DecodeFormatVersion(value);
  if (!version.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a usable kcache store: ", version.status().message()));
  }
  if (*version != kStoreFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("store at ", path, " has format ", *version, ", this kcache reads up to ",
                     kStoreFormatVersion,
                     *version > kStoreFormatVersion ? "; upgrade kcache"
                                                    : "; rebuild the store with `kcache warm`"));
  }
  return *version;
}

// Checks that `path` holds a kcache store of a format this build reads, without writing to
// it, and returns its column families.
absl::StatusOr<std::vector<std::string>> InspectExisting(const std::string& path,
                                                         const StoreOptions& options) {
  std::string not_store = absl::StrCat(path, " is not a kcache store: ");
  std::error_code ec;
  if (!fs::exists(fs::path(path) / "CURRENT", ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(not_store,
                     "the directory is not empty and holds no RocksDB database; give kcache an "
                     "empty or new directory"));
  }
  std::vector<std::string> families;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &families);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(not_store, s.ToString()));
  if (std::find(families.begin(), families.end(), kMetaFamily) == families.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(not_store, "it is a RocksDB database without a 'meta' column family"));
  }
  StoreOptions probe_options = options;
  probe_options.read_only = true;
  absl::StatusOr<std::unique_ptr<OpenDb>> probe =
      OpenFamilies(path, BaseDbOptions(probe_options),
                   {rocksdb::kDefaultColumnFamilyName, kMetaFamily}, probe_options);
  if (!probe.ok()) return probe.status();
  absl::StatusOr<uint32_t> version = ReadFormatVersion(**probe, path);
  if (!version.ok()) return version.status();
  for (const std::string& name : RequiredFamilies()) {
    if (std::find(families.begin(), families.end(), name) == families.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kcache store at ", path, " is damaged: column family '", name, "' is missing"));
    }
  }
  return families;
}

class RocksStore : public Store {
 public:
  RocksStore(std::string path, StoreOptions options, std::unique_ptr<OpenDb> open)
      : path_(std::move(path)),
        options_(options),
        open_(std::move(open)),
        artifacts_(open_->Family(kArtifactsFamily)),
        artifact_meta_(open_->Family(kArtifactMetaFamily)),
        kernels_(open_->Family(kKernelsFamily)) {}

  absl::StatusOr<Artifact> Get(const ArtifactKey& key) override {
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
    std::string raw_key = key.Encode();
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db()->Get(Reading(), artifacts_, raw_key, &value);
    if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat("no artifact ", key.ToString()));
    absl::StatusOr<Artifact> artifact = absl::DataLossError(s.ToString());
    if (s.ok()) {
      artifact = DecodeArtifactValue(View(value));
      if (artifact.ok() && artifact->meta.key.Encode() != raw_key) {
        artifact = absl::DataLossError(
            absl::StrCat("the value belongs to ", artifact->meta.key.ToString()));
      }
    } else if (!s.IsCorruption()) {
      return FromRocks(s, absl::StrCat("reading ", key.ToString(), " from ", path_));
    }
    if (!artifact.ok()) {
      return DropCorrupt(absl::StrCat("artifact ", key.ToString()), artifact.status(),
                         {{artifacts_, raw_key}, {artifact_meta_, raw_key}});
    }
    return artifact;
  }

  absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(const KernelId& id) override {
    return ScanArtifacts(ArtifactKey::KernelPrefix(id));
  }

  absl::StatusOr<std::vector<ArtifactMeta>> ListAllArtifacts() override {
    return ScanArtifacts("");
  }

  absl::Status Put(const Artifact& artifact) override {
    if (absl::Status s = CheckWritable(); !s.ok()) return s;
    const ArtifactKey& key = artifact.meta.key;
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
    ArtifactMeta meta = artifact.meta;
    meta.size = artifact.bytes.size();
    meta.checksum = PayloadChecksum(artifact.bytes);
    if (meta.created_unix_ms == 0) meta.created_unix_ms = NowUnixMillis();
    if (meta.last_used_unix_ms == 0) meta.last_used_unix_ms = meta.created_unix_ms;
    std::string raw_key = key.Encode();
    rocksdb::WriteBatch batch;
    batch.Put(artifacts_, raw_key, EncodeArtifactValue(meta, artifact.bytes, options_.zstd_level));
    batch.Put(artifact_meta_, raw_key, EncodeArtifactMetaValue(meta));
    return Write(batch, absl::StrCat("writing ", key.ToString()));
  }

  absl::Status PutKernel(const KernelRecord& record) override {
    if (absl::Status s = CheckWritable(); !s.ok()) return s;
    rocksdb::WriteBatch batch;
    batch.Put(kernels_, ToSlice(record.id.Bytes()), EncodeKernelValue(record, options_.zstd_level));
    return Write(batch, absl::StrCat("writing kernel ", record.id.ShortHex()));
  }

  absl::StatusOr<KernelRecord> GetKernel(const KernelId& id) override {
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db()->Get(Reading(), kernels_, ToSlice(id.Bytes()), &value);
    if (s.IsNotFound()) {
      return absl::NotFoundError(absl::StrCat("kernel ", id.Hex(), " is not in the store"));
    }
    absl::StatusOr<KernelRecord> record = absl::DataLossError(s.ToString());
    if (s.ok()) {
      record = DecodeKernel(id.Bytes(), View(value));
    } else if (!s.IsCorruption()) {
      return FromRocks(s, absl::StrCat("reading kernel ", id.Hex()));
    }
    if (!record.ok()) {
      return DropCorrupt(absl::StrCat("kernel record ", id.Hex()), record.status(),
                         {{kernels_, std::string(id.Bytes())}});
    }
    return record;
  }

  absl::StatusOr<std::vector<KernelRecord>> ListKernels() override {
    std::vector<KernelRecord> records;
    std::vector<std::string> bad;
    std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(Reading(), kernels_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      absl::StatusOr<KernelRecord> record = DecodeKernel(View(it->key()), View(it->value()));
      if (record.ok()) {
        records.push_back(*std::move(record));
      } else {
        bad.push_back(it->key().ToString());
      }
    }
    if (!it->status().ok()) return FromRocks(it->status(), "listing kernels");
    it.reset();
    for (const std::string& key : bad) {
      DropCorrupt("kernel record", absl::DataLossError(""), {{kernels_, key}}).IgnoreError();
    }
    return records;
  }

  absl::StatusOr<StoreStats> Stats() override {
    StoreStats stats;
    stats.format_version = kStoreFormatVersion;
    absl::StatusOr<std::vector<ArtifactMeta>> artifacts = ListAllArtifacts();
    if (!artifacts.ok()) return artifacts.status();
    stats.artifacts = artifacts->size();
    for (const ArtifactMeta& meta : *artifacts) stats.artifact_bytes += meta.size;
    std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(Reading(), kernels_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++stats.kernels;
    if (!it->status().ok()) return FromRocks(it->status(), "counting kernels");
    for (rocksdb::ColumnFamilyHandle* handle : open_->handles) {
      rocksdb::ColumnFamilyMetaData family;
      db()->GetColumnFamilyMetaData(handle, &family);
      stats.disk_bytes += family.size + family.blob_file_size;
    }
    stats.checksum_failures = checksum_failures_.load();
    return stats;
  }

  absl::StatusOr<StoreVerifyReport> Verify() override {
    StoreVerifyReport report;
    auto corrupt = [&](absl::string_view which, const absl::Status& why) {
      checksum_failures_.fetch_add(1, std::memory_order_relaxed);
      report.corrupt.push_back(absl::StrCat(which, ": ", why.message()));
    };
    absl::Status scanned = ForEach(artifacts_, [&](absl::string_view key, absl::string_view value) {
      absl::StatusOr<Artifact> artifact = DecodeArtifactValue(value);
      if (artifact.ok() && artifact->meta.key.Encode() != key) {
        artifact = absl::DataLossError("the value belongs to another key");
      }
      if (!artifact.ok()) {
        return corrupt(absl::StrCat("artifact ", KeyText(key)), artifact.status());
      }
      ++report.artifacts;
      report.artifact_bytes += artifact->bytes.size();
    });
    if (scanned.ok()) {
      scanned = ForEach(artifact_meta_, [&](absl::string_view key, absl::string_view value) {
        absl::StatusOr<ArtifactMeta> meta = DecodeArtifactMetaValue(value);
        if (meta.ok() && meta->key.Encode() != key) {
          meta = absl::DataLossError("the entry belongs to another key");
        }
        if (!meta.ok()) {
          return corrupt(absl::StrCat("listing entry of ", KeyText(key)), meta.status());
        }
        ++report.listings;
      });
    }
    if (scanned.ok()) {
      scanned = ForEach(kernels_, [&](absl::string_view key, absl::string_view value) {
        absl::StatusOr<KernelRecord> record = DecodeKernel(key, value);
        if (!record.ok()) {
          return corrupt(absl::StrCat("kernel record ", KernelIdText(key)), record.status());
        }
        ++report.kernels;
      });
    }
    if (!scanned.ok()) return scanned;
    return report;
  }

  const std::string& path() const override { return path_; }

 private:
  using Location = std::pair<rocksdb::ColumnFamilyHandle*, std::string>;

  rocksdb::DB* db() const { return open_->db.get(); }

  // Our own XXH3 checks every value; RocksDB's software CRC32c would cost ~15x more.
  static rocksdb::ReadOptions Reading() {
    rocksdb::ReadOptions read;
    read.verify_checksums = false;
    return read;
  }

  absl::Status CheckWritable() const {
    if (!options_.read_only) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "the store at ", path_, " was opened read-only; write to the daemon's writable store"));
  }

  // Keys whose toolkit id does not fit the key's length byte are never stored.
  static absl::Status CheckKey(const ArtifactKey& key) {
    if (key.toolkit.size() <= kMaxKeyStringSize) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "toolkit id of ", key.ToString(), " is longer than ", kMaxKeyStringSize, " bytes"));
  }

  absl::Status Write(rocksdb::WriteBatch& batch, absl::string_view what) {
    rocksdb::WriteOptions write;
    write.sync = true;
    rocksdb::Status s = db()->Write(write, &batch);
    return s.ok() ? absl::OkStatus() : FromRocks(s, absl::StrCat(what, " to ", path_));
  }

  // Counts a value that did not verify, deletes it when writable, and returns the miss.
  absl::Status DropCorrupt(absl::string_view what, const absl::Status& why,
                           const std::vector<Location>& locations) {
    checksum_failures_.fetch_add(1, std::memory_order_relaxed);
    bool deleted = false;
    if (!options_.read_only) {
      rocksdb::WriteBatch batch;
      for (const auto& [family, key] : locations) batch.Delete(family, key);
      deleted = Write(batch, "deleting a corrupt value").ok();
    }
    return absl::NotFoundError(absl::StrCat(what, " was corrupt in the store at ", path_, " (",
                                            why.message(), "); ", deleted ? "it was deleted; " : "",
                                            "treated as a miss"));
  }

  // Calls fn(key, value) for every entry of `family`, in key order.
  template <typename Fn>
  absl::Status ForEach(rocksdb::ColumnFamilyHandle* family, Fn fn) {
    std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(Reading(), family));
    for (it->SeekToFirst(); it->Valid(); it->Next()) fn(View(it->key()), View(it->value()));
    if (it->status().ok()) return absl::OkStatus();
    return FromRocks(it->status(), absl::StrCat("reading ", family->GetName(), " of ", path_));
  }

  static std::string KeyText(absl::string_view raw_key) {
    absl::StatusOr<ArtifactKey> key = ArtifactKey::Decode(raw_key);
    return key.ok() ? key->ToString() : "(undecodable key)";
  }
  static std::string KernelIdText(absl::string_view raw_key) {
    absl::StatusOr<KernelId> id = KernelId::FromBytes(raw_key);
    return id.ok() ? id->Hex() : "(undecodable key)";
  }

  absl::StatusOr<KernelRecord> DecodeKernel(absl::string_view raw_key, absl::string_view value) {
    absl::StatusOr<KernelRecord> record = DecodeKernelValue(value);
    if (record.ok() && record->id.Bytes() != raw_key) {
      return absl::DataLossError("the kernel record belongs to another kernel id");
    }
    return record;
  }

  // Metadata under the listing family for keys starting with `prefix` ("" = all). A listing
  // entry that does not verify is counted and rebuilt from the artifact value when that one
  // verifies; otherwise it is skipped (and dropped when writable).
  absl::StatusOr<std::vector<ArtifactMeta>> ScanArtifacts(const std::string& prefix) {
    std::string upper = prefix;
    while (!upper.empty() && static_cast<uint8_t>(upper.back()) == 0xff) upper.pop_back();
    if (!upper.empty()) upper.back() = static_cast<char>(static_cast<uint8_t>(upper.back()) + 1);
    rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions read = Reading();
    if (!upper.empty()) read.iterate_upper_bound = &upper_slice;

    std::vector<ArtifactMeta> metas;
    std::vector<std::string> bad;
    std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(read, artifact_meta_));
    for (it->Seek(prefix); it->Valid(); it->Next()) {
      absl::StatusOr<ArtifactMeta> meta = DecodeArtifactMetaValue(View(it->value()));
      if (meta.ok() && meta->key.Encode() == View(it->key())) {
        metas.push_back(*std::move(meta));
      } else {
        bad.push_back(it->key().ToString());
      }
    }
    if (!it->status().ok()) return FromRocks(it->status(), "listing artifacts");
    it.reset();
    for (const std::string& raw_key : bad) {
      if (std::optional<ArtifactMeta> meta = RepairListing(raw_key)) metas.push_back(*meta);
    }
    return metas;
  }

  std::optional<ArtifactMeta> RepairListing(const std::string& raw_key) {
    checksum_failures_.fetch_add(1, std::memory_order_relaxed);
    absl::StatusOr<ArtifactKey> key = ArtifactKey::Decode(raw_key);
    absl::StatusOr<Artifact> artifact =
        key.ok() ? Get(*key) : absl::StatusOr<Artifact>(absl::NotFoundError(""));
    if (!options_.read_only && (artifact.ok() || absl::IsNotFound(artifact.status()))) {
      rocksdb::WriteBatch batch;
      if (artifact.ok()) {
        batch.Put(artifact_meta_, raw_key, EncodeArtifactMetaValue(artifact->meta));
      } else {
        batch.Delete(artifact_meta_, raw_key);
        batch.Delete(artifacts_, raw_key);
      }
      Write(batch, "repairing an artifact listing entry").IgnoreError();
    }
    if (!artifact.ok()) return std::nullopt;
    return artifact->meta;
  }

  const std::string path_;
  const StoreOptions options_;
  const std::unique_ptr<OpenDb> open_;
  rocksdb::ColumnFamilyHandle* const artifacts_;
  rocksdb::ColumnFamilyHandle* const artifact_meta_;
  rocksdb::ColumnFamilyHandle* const kernels_;
  std::atomic<uint64_t> checksum_failures_{0};
};

absl::StatusOr<std::unique_ptr<OpenDb>> CreateStore(const std::string& path,
                                                    const StoreOptions& options) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the store directory ", path, ": ", ec.message()));
  }
  rocksdb::DBOptions db_options = BaseDbOptions(options);
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  absl::StatusOr<std::unique_ptr<OpenDb>> open =
      OpenFamilies(path, db_options, RequiredFamilies(), options);
  if (!open.ok()) return open.status();
  rocksdb::WriteBatch batch;
  rocksdb::ColumnFamilyHandle* meta = (*open)->Family(kMetaFamily);
  batch.Put(meta, kCreatedKey, absl::StrCat(NowUnixMillis()));
  batch.Put(meta, kFormatVersionKey, EncodeFormatVersion(kStoreFormatVersion));
  rocksdb::WriteOptions write;
  write.sync = true;
  rocksdb::Status s = (*open)->db->Write(write, &batch);
  if (!s.ok()) return FromRocks(s, absl::StrCat("cannot initialize the store at ", path));
  return open;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                 const StoreOptions& options) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store path ", path, " exists but is not a directory; give kcache a directory"));
  }
  bool empty = !fs::exists(status) || fs::is_empty(path, ec);
  absl::StatusOr<std::unique_ptr<OpenDb>> open;
  if (empty) {
    if (options.read_only || !options.create_if_missing) {
      return absl::NotFoundError(
          absl::StrCat("no kcache store at ", path, options.read_only ? " to open read-only" : "",
                       "; create one with `kcache warm` or open it writable"));
    }
    open = CreateStore(path, options);
  } else {
    absl::StatusOr<std::vector<std::string>> families = InspectExisting(path, options);
    if (!families.ok()) return families.status();
    std::vector<std::string> to_open = *families;
    if (options.read_only) to_open = RequiredFamilies();  // read-only may open a subset
    open = OpenFamilies(path, BaseDbOptions(options), to_open, options);
  }
  if (!open.ok()) return open.status();
  return std::unique_ptr<Store>(new RocksStore(path, options, *std::move(open)));
}

}  // namespace kcache
