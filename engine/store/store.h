// Store: the persistent tier of artifacts and kernel records. One implementation today
// (RocksDB, rocks_store.cc, opened by store_open.cc); callers see only this interface and the
// factory below.
#ifndef KCACHE_ENGINE_STORE_STORE_H_
#define KCACHE_ENGINE_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace kcache {

// Something a store did on its own that its owner should hear about (the daemon logs it).
struct StoreEvent {
  enum class Kind {
    kCorrupt,   // a value that did not verify: a miss, dropped (writable) and rebuilt later
    kEvicted,   // least recently used entries deleted to stay within max_bytes
    kDiskFull,  // a write refused: the disk is (nearly) full; reads go on
    kReplaced,  // a writable store that could not open was moved aside and replaced
  };
  Kind kind = Kind::kCorrupt;
  std::string text;  // one line: which entry or store, what was wrong, what was done
};

struct StoreOptions {
  // Open without writing anything (a store baked into an image). Puts fail with
  // FailedPrecondition. The store must exist.
  bool read_only = false;
  // Create the directory and an empty store if absent (ignored when read_only).
  bool create_if_missing = true;
  // zstd level for values (1..3 are sensible; 19 is ~4 s per 5 MiB).
  int zstd_level = 1;
  // Values at least this large go to blob files.
  uint64_t min_blob_size = 4096;
  // Bound of a writable store in bytes (artifact payloads, uncompressed, plus kernel
  // records); 0: unbounded. Past it, Put evicts the least recently used artifacts (then kernel
  // records no artifact needs) down to 90% of the bound. Read-only stores are never evicted.
  uint64_t max_bytes = 0;
  // A write is refused (ResourceExhausted, counted in writes_refused_full) when the disk
  // holding the store has less than this many bytes free besides the write: RocksDB never
  // meets a full disk. A writable open on such a disk opens read-only instead (serving what
  // is stored; every write refused) until a later open finds room.
  uint64_t min_free_bytes = uint64_t{64} << 20;
  // A writable store that exists but cannot be opened (damaged MANIFEST, SST or blob file, a
  // lost column family) is moved aside into <path>/.kcache-damaged-<unix ms>/ (only the
  // newest such copy is kept), whatever still verifies in it is copied into a new empty store
  // at `path`, and the open succeeds (StoreStats::replaced_damaged). Off: such a store is an
  // error (DataLoss, or InvalidArgument when it no longer looks like a store).
  bool replace_if_damaged = false;
  // Receives StoreEvents, from any thread calling the store (and OpenStore); may be empty.
  // Must not call back into the store.
  std::function<void(const StoreEvent&)> on_event;
  // RocksDB's own LOG file in the store directory, rotated at every writable open. Off for
  // processes that open a store for one command (the compiler launchers: a build opens it from
  // many processes at once, which would rotate and delete each other's LOG files). Read-only
  // opens never write it.
  bool rocksdb_log = true;
  // Open the store's table files from the opening thread, as reads need them, instead of
  // from 16 threads started at open (and skip loading their statistics): for processes that
  // open a store for one command (the launchers), where starting threads costs more than the
  // reads they would share.
  bool open_files_lazily = false;
  // The RocksDB Env (file system) to use; nullptr: rocksdb::Env::Default(). Tests pass one that
  // injects faults. Borrowed: must outlive the store.
  rocksdb::Env* env = nullptr;
};

struct StoreStats {
  uint64_t kernels = 0;              // kernel records
  uint64_t artifacts = 0;            // artifact entries
  uint64_t artifact_bytes = 0;       // sum of payload sizes (uncompressed)
  uint64_t disk_bytes = 0;           // SST + blob files on disk
  uint64_t checksum_failures = 0;    // bad values seen by reads since open
  uint64_t format_version = 0;       // docs/store-format.md
  uint64_t max_bytes = 0;            // StoreOptions::max_bytes (0: unbounded)
  uint64_t evictions = 0;            // artifacts and kernel records evicted since open
  uint64_t evicted_bytes = 0;        // their bytes
  uint64_t writes_refused_full = 0;  // writes refused since open: the disk was full
  bool read_only_full = false;       // opened read-only because the disk was full
  bool replaced_damaged = false;     // moved aside and replaced at open (replace_if_damaged)
};

// What RepairStore did (kcache doctor --repair).
struct StoreRepairReport {
  bool replaced = false;              // the store could not open: moved aside, then salvaged
  bool rebuilt = false;               // RocksDB could not read a family: copied into a new store
  std::string moved_aside_to;         // where the damaged files went (replaced or rebuilt)
  uint64_t salvaged = 0;              // entries copied from the damaged store (replaced/rebuilt)
  uint64_t dropped = 0;               // values that did not verify, deleted
  uint64_t listings_rebuilt = 0;      // listing entries rewritten from their artifact
  std::vector<std::string> problems;  // one line per thing found and what was done
};

// What Store::Verify found (kcache doctor).
struct StoreVerifyReport {
  uint64_t kernels = 0;              // kernel records that verified
  uint64_t artifacts = 0;            // artifact values that verified
  uint64_t artifact_bytes = 0;       // their payload sizes (uncompressed)
  uint64_t listings = 0;             // listing (metadata-only) entries that verified
  std::vector<std::string> corrupt;  // one line per value that did not verify: which, why
};

// Thread-safe: every method may be called from any thread at any time.
class Store {
 public:
  virtual ~Store() = default;

  // The artifact under `key`. NotFound if absent. A value whose checksum or framing does not
  // verify is never returned: it counts in checksum_failures, is deleted when the store is
  // writable, and the call answers NotFound (a miss) with a message saying it was corrupt.
  virtual absl::StatusOr<Artifact> Get(const ArtifactKey& key) = 0;

  // Notes that `key` was just served (from a tier above the store, e.g. kcached's memory), so
  // eviction sees it as recently used. Get notes its own hits. Cheap: kept in memory and
  // written to the listing entries in batches (and on close), never one write per hit. Does
  // nothing in a read-only store.
  virtual void RecordUse(const ArtifactKey& key) {}

  // Metadata of every artifact of one kernel (a prefix scan), payloads not included. Entries
  // that fail to decode are counted and rebuilt from their artifact; when RocksDB cannot read
  // the listing at all, the list is rebuilt from the artifacts themselves (and rewritten).
  virtual absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(const KernelId& id) = 0;

  // Metadata of every artifact in the store.
  virtual absl::StatusOr<std::vector<ArtifactMeta>> ListAllArtifacts() = 0;

  // Writes (or replaces) an artifact; meta.size and meta.checksum are computed here from
  // the bytes. Durable when it returns (WAL synced). ResourceExhausted when the disk is full
  // (nothing written; reads go on). May evict least recently used entries (max_bytes).
  virtual absl::Status Put(const Artifact& artifact) = 0;

  // As Put, for an artifact the caller hands over: the store may free its bytes once it has
  // encoded them, before the write, so that a large artifact is held at most twice while it is
  // written (its bytes or their compressed form, and the store's own copy; kcached's uploads,
  // docs/kcached.md) rather than three or four times.
  virtual absl::Status PutOwned(Artifact artifact) { return Put(artifact); }

  // As Put, for a copy of an artifact that another store keeps holding (kcached's write-back
  // of a baked-store hit): the write is not synced, so a request waits for no disk flush. A
  // crash may lose it; the next hit writes it again.
  virtual absl::Status PutCopy(const Artifact& artifact) { return Put(artifact); }

  // Deletes the artifact under `key` and its listing entry (the Redis door's DEL). OK when
  // it is absent. FailedPrecondition in a read-only store; Unimplemented where the store
  // cannot delete. Durable when it returns.
  virtual absl::Status Delete(const ArtifactKey& key) {
    return absl::UnimplementedError("this store cannot delete entries");
  }

  // Kernel records: the spec behind a kernel id, so a miss can be compiled later.
  virtual absl::Status PutKernel(const KernelRecord& record) = 0;
  virtual absl::StatusOr<KernelRecord> GetKernel(const KernelId& id) = 0;
  virtual absl::StatusOr<std::vector<KernelRecord>> ListKernels() = 0;

  virtual absl::StatusOr<StoreStats> Stats() = 0;

  // Reads and verifies every stored value, payloads included: each artifact (both checksums,
  // framing, the decompressed payload) with its key, each listing entry, each kernel record.
  // Changes nothing, even when writable: a value that does not verify is counted in
  // checksum_failures and reported, not deleted (Get drops it on its next read). Reads one
  // value at a time. An error only when the store cannot be read at all.
  virtual absl::StatusOr<StoreVerifyReport> Verify() = 0;

  // The directory the store lives in.
  virtual const std::string& path() const = 0;
};

// Opens (or creates) the RocksDB store at `path`. InvalidArgument with a clear message when
// `path` is not a kcache store or has a newer format version; NotFound when read_only and
// absent; DataLoss when it is damaged (see StoreOptions::replace_if_damaged).
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                 const StoreOptions& options = {});

// Repairs the store at `path`, which nothing else may have open (kcache doctor --repair):
// opens it writable with replace_if_damaged; deletes every value that does not verify;
// rebuilds listing entries that are bad or missing and drops those without an artifact; and
// when RocksDB cannot read a family to its end (a damaged SST), moves the files aside and
// copies everything that still verifies into a new store. FailedPrecondition when the store
// is open elsewhere (a running kcached).
absl::StatusOr<StoreRepairReport> RepairStore(const std::string& path, StoreOptions options = {});

// Finds kernels by display name or by hex id (full or a unique prefix of at least 8 digits).
// Several records with one name (a kernel edited and warmed again): the most recently
// registered wins. NotFound naming what was asked, with a hint to run `kcache ls`.
absl::StatusOr<KernelRecord> FindKernel(Store& store, absl::string_view name_or_id);

}  // namespace kcache

#endif  // KCACHE_ENGINE_STORE_STORE_H_
