// Store: the persistent tier of artifacts and kernel records. One implementation today
// (RocksDB, rocks_store.cc); callers see only this interface and the factory below.
#ifndef KCACHE_ENGINE_STORE_STORE_H_
#define KCACHE_ENGINE_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"

namespace kcache {

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
};

struct StoreStats {
  uint64_t kernels = 0;            // kernel records
  uint64_t artifacts = 0;          // artifact entries
  uint64_t artifact_bytes = 0;     // sum of payload sizes (uncompressed)
  uint64_t disk_bytes = 0;         // SST + blob files on disk
  uint64_t checksum_failures = 0;  // bad values seen by reads since open
  uint64_t format_version = 0;     // docs/store-format.md
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

  // Metadata of every artifact of one kernel (a prefix scan), payloads not included. Entries
  // that fail to decode are skipped and counted.
  virtual absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(const KernelId& id) = 0;

  // Metadata of every artifact in the store.
  virtual absl::StatusOr<std::vector<ArtifactMeta>> ListAllArtifacts() = 0;

  // Writes (or replaces) an artifact; meta.size and meta.checksum are computed here from
  // the bytes. Durable when it returns (WAL synced).
  virtual absl::Status Put(const Artifact& artifact) = 0;

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
// absent.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                 const StoreOptions& options = {});

}  // namespace kcache

#endif  // KCACHE_ENGINE_STORE_STORE_H_
