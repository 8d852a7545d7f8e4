// How a store directory is opened (OpenStore): created when empty, checked to be a kcache
// store of a format this build reads, opened read-only when its disk is full, and moved aside
// and replaced when a writable store is damaged. docs/store-format.md, "Opening a store".
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/store/rocks_db.h"
#include "engine/store/rocks_store.h"
#include "engine/store/value_format.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using store_internal::FromRocks;
using store_internal::OpenDb;
using store_internal::OpenFamilies;
using store_internal::RequiredFamilies;

// In the message of a store whose format this kcache does not read (never damage).
constexpr char kReadsUpTo[] = "this kcache reads up to";

absl::StatusOr<uint32_t> ReadFormatVersion(const OpenDb& open, const std::string& path) {
  std::string value;
  rocksdb::Status s =
      open.db->Get(rocksdb::ReadOptions(), open.Family(kMetaFamily), kFormatVersionKey, &value);
  if (s.IsNotFound() && store_internal::LooksLikeKcacheStore(path)) {
    return absl::DataLossError(
        absl::StrCat("kcache store at ", path, " is damaged: its format record is lost"));
  }
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
    return absl::InvalidArgumentError(absl::StrCat(
        "store at ", path, " has format ", *version, ", ", kReadsUpTo, " ", kStoreFormatVersion,
        *version > kStoreFormatVersion ? "; upgrade kcache"
                                       : "; rebuild the store with `kcache warm`"));
  }
  return *version;
}

// Checks that `path` holds a kcache store of a format this build reads, without writing to
// it, and returns its column families.
absl::StatusOr<std::vector<std::string>> InspectOnce(const std::string& path,
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
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(store_internal::BaseDbOptions(options), path, &families);
  if (!s.ok() && store_internal::LooksLikeKcacheStore(path)) {
    return absl::DataLossError(
        absl::StrCat("kcache store at ", path, " is damaged: ", s.ToString()));
  }
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(not_store, s.ToString()));
  if (std::find(families.begin(), families.end(), kMetaFamily) == families.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(not_store, "it is a RocksDB database without a 'meta' column family"));
  }
  StoreOptions probe_options = options;
  probe_options.read_only = true;
  absl::StatusOr<std::unique_ptr<OpenDb>> probe =
      OpenFamilies(path, store_internal::BaseDbOptions(probe_options),
                   {rocksdb::kDefaultColumnFamilyName, kMetaFamily}, probe_options);
  if (!probe.ok()) return probe.status();
  absl::StatusOr<uint32_t> version = ReadFormatVersion(**probe, path);
  if (!version.ok()) return version.status();
  for (const std::string& name : RequiredFamilies()) {
    if (std::find(families.begin(), families.end(), name) == families.end()) {
      return absl::DataLossError(absl::StrCat(
          "kcache store at ", path, " is damaged: column family '", name, "' is missing"));
    }
  }
  return families;
}

// InspectOnce, except that a store another process holds open for writing is never called
// damaged or foreign: that process may be creating it this moment (RocksDB first writes a
// database with only the default family; the families and the format record follow), so the
// answer is FailedPrecondition, which openers wait on, never a reason to move it aside. A
// failure seen while nobody holds it is looked at once more: the creator may have finished
// between the first look's reads and the lock check.
absl::StatusOr<std::vector<std::string>> InspectExisting(const std::string& path,
                                                         const StoreOptions& options) {
  absl::StatusOr<std::vector<std::string>> families = InspectOnce(path, options);
  for (int look = 0; look < 2; ++look) {
    if (families.ok() || absl::IsFailedPrecondition(families.status())) return families;
    if (store_internal::LockHeldElsewhere(path)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the store at ", path,
          " is held for writing by another process (kcached, kcache warm or a launcher, perhaps "
          "creating it now) and cannot be read yet (",
          families.status().message(), "); try again when it is done"));
    }
    if (look == 0) families = InspectOnce(path, options);
  }
  return families;
}

absl::StatusOr<std::unique_ptr<OpenDb>> CreateStore(const std::string& path,
                                                    const StoreOptions& options) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the store directory ", path, ": ", ec.message()));
  }
  rocksdb::DBOptions db_options = store_internal::BaseDbOptions(options);
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

// Empty: absent, or holding nothing but moved-aside damaged copies and what RocksDB writes
// before a database exists (its LOG files and LOCK: another process may be creating the store
// this moment; creating it here then waits on that process's lock).
bool IsEmptyStoreDir(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return true;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, store_internal::kDamagedPrefix) && name != "LOCK" &&
        name != "LOG" && !absl::StartsWith(name, "LOG.old.")) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<OpenDb>> OpenExisting(const std::string& path,
                                                     const StoreOptions& options) {
  absl::StatusOr<std::vector<std::string>> families = InspectExisting(path, options);
  if (!families.ok()) return families.status();
  std::vector<std::string> to_open = *families;
  if (options.read_only) to_open = RequiredFamilies();  // read-only may open a subset
  return OpenFamilies(path, store_internal::BaseDbOptions(options), to_open, options);
}

// An open failure that damage explains (not a lock, a newer format, a full disk, or a
// directory that never was a kcache store).
bool IsDamagedStore(const std::string& path, const absl::Status& s) {
  if (absl::IsFailedPrecondition(s) || absl::IsResourceExhausted(s) || absl::IsNotFound(s) ||
      absl::StrContains(s.message(), kReadsUpTo)) {
    return false;
  }
  return store_internal::LooksLikeKcacheStore(path);
}

bool RoomToWrite(const StoreOptions& options, const std::string& path) {
  std::optional<uint64_t> free = store_internal::FreeBytes(options.env, path);
  return !free || *free >= options.min_free_bytes;
}

// A writable open of an existing store on a full disk: read-only instead (nothing written).
absl::StatusOr<std::unique_ptr<Store>> OpenFull(const std::string& path, StoreOptions options) {
  StoreOptions read_only = options;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<OpenDb>> open = OpenExisting(path, read_only);
  if (!open.ok()) return open.status();
  if (options.on_event) {
    options.on_event(StoreEvent{
        StoreEvent::Kind::kDiskFull,
        absl::StrCat("the disk under ", path, " is full (under ", options.min_free_bytes >> 20,
                     " MiB free): the store is open read-only, serving what it holds; it stores "
                     "nothing new until it is reopened with room")});
  }
  options.read_only = true;
  return std::unique_ptr<Store>(new store_internal::RocksStore(
      path, std::move(options), *std::move(open), /*read_only_full=*/true, /*replaced=*/false));
}

absl::StatusOr<std::unique_ptr<Store>> ReplaceDamaged(const std::string& path,
                                                      const StoreOptions& options,
                                                      const absl::Status& why);

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                 const StoreOptions& options) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store path ", path, " exists but is not a directory; give kcache a directory"));
  }
  bool writable = !options.read_only;
  if (IsEmptyStoreDir(path)) {
    if (options.read_only || !options.create_if_missing) {
      return absl::NotFoundError(
          absl::StrCat("no kcache store at ", path, options.read_only ? " to open read-only" : "",
                       "; create one with `kcache warm` or open it writable"));
    }
    absl::StatusOr<std::unique_ptr<OpenDb>> open = CreateStore(path, options);
    if (!open.ok()) return open.status();
    return std::unique_ptr<Store>(
        new store_internal::RocksStore(path, options, *std::move(open), false, false));
  }
  if (writable && !RoomToWrite(options, path)) return OpenFull(path, options);
  absl::StatusOr<std::unique_ptr<OpenDb>> open = OpenExisting(path, options);
  if (open.ok()) {
    return std::unique_ptr<Store>(
        new store_internal::RocksStore(path, options, *std::move(open), false, false));
  }
  if (writable && absl::IsResourceExhausted(open.status())) return OpenFull(path, options);
  if (writable && options.replace_if_damaged && IsDamagedStore(path, open.status())) {
    return ReplaceDamaged(path, options, open.status());
  }
  return open.status();
}

namespace {

absl::StatusOr<std::unique_ptr<Store>> ReplaceDamaged(const std::string& path,
                                                      const StoreOptions& options,
                                                      const absl::Status& why) {
  absl::StatusOr<std::string> aside = store_internal::MoveAside(path);
  if (!aside.ok()) {
    return absl::DataLossError(absl::StrCat(
        why.message(), "; and it could not be moved aside: ", aside.status().message()));
  }
  absl::StatusOr<std::unique_ptr<OpenDb>> created = CreateStore(path, options);
  if (!created.ok()) return created.status();
  auto store = std::make_unique<store_internal::RocksStore>(path, options, *std::move(created),
                                                            false, /*replaced=*/true);
  // Whatever still opens and verifies in the damaged copy comes back (often nothing: it did
  // not open).
  uint64_t salvaged = 0;
  StoreOptions old_options;
  old_options.read_only = true;
  old_options.env = options.env;
  absl::StatusOr<std::unique_ptr<OpenDb>> old = OpenExisting(*aside, old_options);
  if (old.ok()) {
    store_internal::RocksStore from(*aside, old_options, *std::move(old), false, false);
    salvaged = store->CopyVerifiedFrom(from);
  }
  if (options.on_event) {
    options.on_event(StoreEvent{
        StoreEvent::Kind::kReplaced,
        absl::StrCat(
            "the store at ", path, " could not be opened (", why.message(), "); moved it aside to ",
            *aside, " and started an empty store",
            salvaged > 0 ? absl::StrCat(" with the ", salvaged, " entries that verified") : "",
            "; what is missing is compiled or warmed again")});
  }
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace

}  // namespace kcache
