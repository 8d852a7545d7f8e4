// Verification, repair and salvage of a store (kcache doctor, kcache doctor --repair, and a
// damaged writable store replaced at open). docs/store-format.md, "Damage and repair".
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "engine/store/rocks_store.h"
#include "engine/store/value_format.h"

namespace kcache {
namespace store_internal {
namespace {

std::string KeyText(absl::string_view raw_key) {
  absl::StatusOr<ArtifactKey> key = ArtifactKey::Decode(raw_key);
  return key.ok() ? key->ToString() : "(undecodable key)";
}

std::string KernelIdText(absl::string_view raw_key) {
  absl::StatusOr<KernelId> id = KernelId::FromBytes(raw_key);
  return id.ok() ? id->Hex() : "(undecodable key)";
}

// Decodes the artifact value under `raw_key`; DataLoss (or NotFound) when it does not verify.
absl::StatusOr<Artifact> ReadArtifact(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family,
                                      const std::string& raw_key) {
  rocksdb::ReadOptions read;
  read.verify_checksums = false;
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db->Get(read, family, raw_key, &value);
  if (s.IsNotFound()) return absl::NotFoundError("absent");
  if (!s.ok()) return absl::DataLossError(s.ToString());
  absl::StatusOr<Artifact> artifact = DecodeArtifactValue(View(value));
  if (artifact.ok() && artifact->meta.key.Encode() != raw_key) {
    return absl::DataLossError("the value belongs to another key");
  }
  return artifact;
}

// Every key of `family` an iterator reaches before it fails; *failure says why it stopped.
// `verify`: RocksDB's block checksums on, so a damaged block stops the scan visibly (off for
// artifacts, whose values carry their own checksums, so one bad blob does not end the scan).
std::set<std::string> KeysOf(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family,
                             rocksdb::Status* failure, bool verify) {
  rocksdb::ReadOptions read;
  read.verify_checksums = verify;
  std::set<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read, family));
  for (it->SeekToFirst(); it->Valid(); it->Next()) keys.insert(it->key().ToString());
  *failure = it->status();
  return keys;
}

}  // namespace

absl::StatusOr<StoreVerifyReport> RocksStore::Verify() {
  StoreVerifyReport report;
  auto corrupt = [&](absl::string_view which, absl::string_view why) {
    checksum_failures_.fetch_add(1, std::memory_order_relaxed);
    report.corrupt.push_back(absl::StrCat(which, ": ", why));
  };
  // Keys come from the listing and the artifacts both, so a family RocksDB cannot read to its
  // end still has each of its artifacts checked one by one.
  rocksdb::Status artifacts_failure, listing_failure;
  std::set<std::string> artifact_keys = KeysOf(db(), artifacts_, &artifacts_failure, false);
  std::set<std::string> listing_keys = KeysOf(db(), listing(), &listing_failure, true);
  for (const auto& [failure, family] :
       {std::pair{artifacts_failure, kArtifactsFamily}, {listing_failure, kArtifactMetaFamily}}) {
    if (failure.ok()) continue;
    if (!IsDamage(failure)) return FromRocks(failure, absl::StrCat("reading ", path_));
    corrupt(absl::StrCat("column family ", family),
            absl::StrCat("unreadable: ", failure.ToString()));
  }
  std::set<std::string> keys = artifact_keys;
  keys.insert(listing_keys.begin(), listing_keys.end());
  for (const std::string& key : keys) {
    absl::StatusOr<Artifact> artifact = ReadArtifact(db(), artifacts_, key);
    if (!artifact.ok() && !absl::IsNotFound(artifact.status())) {
      corrupt(absl::StrCat("artifact ", KeyText(key)), artifact.status().message());
    } else if (artifact.ok()) {
      ++report.artifacts;
      report.artifact_bytes += artifact->bytes.size();
    }
    if (!listing_keys.contains(key)) {
      if (listing_failure.ok() && artifact.ok()) {
        corrupt(absl::StrCat("listing entry of ", KeyText(key)), "missing");
      }
      continue;
    }
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db()->Get(Reading(), listing(), key, &value);
    absl::StatusOr<ArtifactMeta> meta =
        s.ok() ? DecodeArtifactMetaValue(View(value))
               : absl::StatusOr<ArtifactMeta>(absl::DataLossError(s.ToString()));
    if (meta.ok() && meta->key.Encode() != key) {
      meta = absl::DataLossError("the entry belongs to another key");
    }
    if (!meta.ok()) {
      corrupt(absl::StrCat("listing entry of ", KeyText(key)), meta.status().message());
    } else {
      ++report.listings;
    }
  }
  absl::Status kernels = ForEach(kernels_, [&](absl::string_view key, absl::string_view value) {
    absl::StatusOr<KernelRecord> record = DecodeKernel(key, value);
    if (!record.ok()) {
      return corrupt(absl::StrCat("kernel record ", KernelIdText(key)), record.status().message());
    }
    ++report.kernels;
  });
  if (!kernels.ok()) {
    if (!absl::IsDataLoss(kernels) && !absl::IsUnavailable(kernels)) return kernels;
    corrupt(absl::StrCat("column family ", kKernelsFamily),
            absl::StrCat("unreadable: ", kernels.message()));
  }
  return report;
}

absl::Status RocksStore::RepairValues(StoreRepairReport* report, bool* unreadable) {
  if (absl::Status s = CheckWritable(); !s.ok()) return s;
  *unreadable = false;
  rocksdb::Status artifacts_failure, listing_failure, kernels_failure;
  std::set<std::string> artifact_keys = KeysOf(db(), artifacts_, &artifacts_failure, false);
  std::set<std::string> listing_keys = KeysOf(db(), listing(), &listing_failure, true);
  std::set<std::string> kernel_keys = KeysOf(db(), kernels_, &kernels_failure, true);
  for (const rocksdb::Status& failure : {artifacts_failure, listing_failure, kernels_failure}) {
    if (failure.ok()) continue;
    if (!IsDamage(failure)) return FromRocks(failure, absl::StrCat("reading ", path_));
    *unreadable = true;
    report->problems.push_back(
        absl::StrCat("RocksDB cannot read all of ", path_, ": ", failure.ToString()));
  }
  // RocksDB's own block checksums find damage our values' checksums do not cover.
  if (rocksdb::Status s = db()->VerifyChecksum(); !s.ok() && !*unreadable) {
    *unreadable = true;
    report->problems.push_back(absl::StrCat("RocksDB finds ", path_, " damaged: ", s.ToString()));
  }
  rocksdb::WriteBatch batch;
  std::set<std::string> keys = artifact_keys;
  keys.insert(listing_keys.begin(), listing_keys.end());
  for (const std::string& key : keys) {
    absl::StatusOr<Artifact> artifact = ReadArtifact(db(), artifacts_, key);
    if (!artifact.ok()) {
      batch.Delete(artifacts_, key);
      batch.Delete(listing(), key);
      if (!absl::IsNotFound(artifact.status())) {
        ++report->dropped;
        report->problems.push_back(absl::StrCat("artifact ", KeyText(key), ": ",
                                                artifact.status().message(), "; deleted"));
      }
      continue;
    }
    rocksdb::PinnableSlice value;
    absl::StatusOr<ArtifactMeta> meta = absl::NotFoundError("missing");
    if (db()->Get(Reading(), listing(), key, &value).ok()) {
      meta = DecodeArtifactMetaValue(View(value));
    }
    if (meta.ok() && meta->key == artifact->meta.key && meta->size == artifact->meta.size &&
        meta->checksum == artifact->meta.checksum) {
      continue;
    }
    batch.Put(listing(), key, EncodeArtifactMetaValue(artifact->meta));
    ++report->listings_rebuilt;
    report->problems.push_back(absl::StrCat("listing entry of ", KeyText(key), ": ",
                                            meta.ok() ? "stale" : meta.status().message(),
                                            "; rebuilt from the artifact"));
  }
  for (const std::string& key : kernel_keys) {
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db()->Get(Reading(), kernels_, key, &value);
    absl::StatusOr<KernelRecord> record =
        s.ok() ? DecodeKernel(key, View(value))
               : absl::StatusOr<KernelRecord>(absl::DataLossError(s.ToString()));
    if (record.ok()) continue;
    batch.Delete(kernels_, key);
    ++report->dropped;
    report->problems.push_back(absl::StrCat("kernel record ", KernelIdText(key), ": ",
                                            record.status().message(), "; deleted"));
  }
  absl::MutexLock lock(&write_mu_);
  return Write(batch, batch.GetDataSize(), /*sync=*/true, "repairing");
}

uint64_t RocksStore::CopyVerifiedFrom(RocksStore& from) {
  uint64_t copied = 0;
  rocksdb::Status ignored;
  std::set<std::string> keys = KeysOf(from.db(), from.artifacts_, &ignored, false);
  std::set<std::string> listed = KeysOf(from.db(), from.listing(), &ignored, false);
  keys.insert(listed.begin(), listed.end());
  std::set<std::string> kernel_ids = KeysOf(from.db(), from.kernels_, &ignored, false);
  for (const std::string& key : keys) {
    absl::StatusOr<Artifact> artifact = ReadArtifact(from.db(), from.artifacts_, key);
    if (!artifact.ok()) continue;
    kernel_ids.insert(std::string(artifact->meta.key.kernel_id.Bytes()));
    if (Put(*artifact).ok()) ++copied;
  }
  for (const std::string& raw_id : kernel_ids) {
    absl::StatusOr<KernelId> id = KernelId::FromBytes(raw_id);
    if (!id.ok()) continue;
    rocksdb::PinnableSlice value;
    if (!from.db()->Get(Reading(), from.kernels_, raw_id, &value).ok()) continue;
    absl::StatusOr<KernelRecord> record = from.DecodeKernel(raw_id, View(value));
    if (record.ok() && PutKernel(*record).ok()) ++copied;
  }
  return copied;
}

}  // namespace store_internal

absl::StatusOr<StoreRepairReport> RepairStore(const std::string& path, StoreOptions options) {
  StoreRepairReport report;
  options.read_only = false;
  options.create_if_missing = false;
  options.replace_if_damaged = true;
  auto user_event = options.on_event;
  options.on_event = [&report, user_event](const StoreEvent& event) {
    if (event.kind == StoreEvent::Kind::kReplaced) report.replaced = true;
    if (event.kind == StoreEvent::Kind::kReplaced || event.kind == StoreEvent::Kind::kDiskFull) {
      report.problems.push_back(event.text);
    }
    if (user_event) user_event(event);
  };
  absl::StatusOr<std::unique_ptr<Store>> opened = OpenStore(path, options);
  if (!opened.ok()) return opened.status();
  auto* store = static_cast<store_internal::RocksStore*>(opened->get());
  if (absl::StatusOr<StoreStats> stats = store->Stats(); stats.ok() && stats->read_only_full) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the disk under ", path, " is full; free space, then repair again"));
  }
  bool unreadable = false;
  if (absl::Status s = store->RepairValues(&report, &unreadable); !s.ok()) return s;
  if (!unreadable) return report;

  // RocksDB cannot read part of it: keep what verifies in a new store.
  opened->reset();
  absl::StatusOr<std::string> aside = store_internal::MoveAside(path);
  if (!aside.ok()) return aside.status();
  report.rebuilt = true;
  report.moved_aside_to = *aside;
  options.create_if_missing = true;
  absl::StatusOr<std::unique_ptr<Store>> fresh = OpenStore(path, options);
  if (!fresh.ok()) return fresh.status();
  StoreOptions old_options;
  old_options.read_only = true;
  old_options.env = options.env;
  absl::StatusOr<std::unique_ptr<Store>> old = OpenStore(*aside, old_options);
  if (old.ok()) {
    report.salvaged = static_cast<store_internal::RocksStore*>(fresh->get())
                          ->CopyVerifiedFrom(*static_cast<store_internal::RocksStore*>(old->get()));
  }
  return report;
}

}  // namespace kcache
