// Internal to engine/store: the RocksDB pieces every store file shares (column family
// options, open/close, status mapping, free space). Not part of the Store interface.
#ifndef KCACHE_ENGINE_STORE_ROCKS_DB_H_
#define KCACHE_ENGINE_STORE_ROCKS_DB_H_

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/store/store.h"

namespace kcache::store_internal {

// Maps a RocksDB status: NotFound, Corruption -> DataLoss, NoSpace -> ResourceExhausted,
// InvalidArgument, a held lock -> FailedPrecondition (naming who holds it), other I/O ->
// Unavailable, the rest Internal. `what` starts the message.
absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what);

// A status that damage, not the caller, explains: corruption, a file RocksDB expected and
// did not find (a missing .blob or .sst).
bool IsDamage(const rocksdb::Status& s);

inline absl::string_view View(const rocksdb::Slice& slice) { return {slice.data(), slice.size()}; }
inline rocksdb::Slice ToSlice(absl::string_view view) { return {view.data(), view.size()}; }

// default, artifacts, artifact_meta, kernels, meta.
const std::vector<std::string>& RequiredFamilies();
rocksdb::ColumnFamilyOptions FamilyOptions(const std::string& name, const StoreOptions& options);
rocksdb::DBOptions BaseDbOptions(const StoreOptions& options);

// An open RocksDB with its column family handles, closed (after a flush when writable) on
// destruction.
struct OpenDb {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  // Handles of families dropped while open (a listing rebuilt in place): still readable by
  // scans that began before the drop; destroyed, unflushed, before the others.
  std::vector<rocksdb::ColumnFamilyHandle*> retired;
  bool read_only = true;

  OpenDb() = default;
  OpenDb(const OpenDb&) = delete;
  OpenDb& operator=(const OpenDb&) = delete;
  ~OpenDb();
  rocksdb::ColumnFamilyHandle* Family(absl::string_view name) const;
};

absl::StatusOr<std::unique_ptr<OpenDb>> OpenFamilies(const std::string& path,
                                                     const rocksdb::DBOptions& db_options,
                                                     const std::vector<std::string>& families,
                                                     const StoreOptions& options);

// Bytes free on the file system holding `path`, as `env` sees it; nullopt when it cannot say.
std::optional<uint64_t> FreeBytes(rocksdb::Env* env, const std::string& path);

// True when `path` holds RocksDB files written by kcache (a CURRENT or MANIFEST file and an
// OPTIONS file naming the artifact_meta family): safe to move aside when it will not open.
bool LooksLikeKcacheStore(const std::string& path);

// True when another process holds the RocksDB LOCK of the database at `path` (a fcntl write
// lock on <path>/LOCK, as RocksDB takes it): a writer has it open, or is creating it right
// now. False when nobody does, or when it cannot tell.
bool LockHeldElsewhere(const std::string& path);

// Moves everything in `path` into <path>/.kcache-damaged-<unix ms>/ (deleting an older such
// copy first: only the newest is kept) and returns that folder.
absl::StatusOr<std::string> MoveAside(const std::string& path);

// The name prefix of those folders; OpenStore treats a directory holding only them as empty.
inline constexpr char kDamagedPrefix[] = ".kcache-damaged-";

}  // namespace kcache::store_internal

#endif  // KCACHE_ENGINE_STORE_ROCKS_DB_H_
