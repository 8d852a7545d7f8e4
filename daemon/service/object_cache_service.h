// ObjectCacheService: kcached's side of the compiler launchers (service kcache.v1.ObjectCache,
// proto/kcache/v1/objects.proto). It validates and converts requests and calls an ObjectCache
// (daemon/objects/tiered_object_cache.h: baked stores first, client-made puts into the
// writable store only) and, for AwaitCompile, the launchers' turns
// (daemon/objects/compile_turns.h), and nothing else. Sync API: store reads and writes, and
// launchers waiting for their turn, block gRPC's sync threads (the turns bound how many),
// never the KernelCache service's callback threads.
#ifndef KCACHE_DAEMON_SERVICE_OBJECT_CACHE_SERVICE_H_
#define KCACHE_DAEMON_SERVICE_OBJECT_CACHE_SERVICE_H_

#include <cstdint>
#include <string>
#include <utility>

#include "daemon/cache/statistics.h"
#include "daemon/objects/compile_turns.h"
#include "daemon/service/byte_budget.h"
#include "daemon/service/peer_identity.h"
#include "engine/objects/object_cache.h"
#include "kcache/v1/objects.grpc.pb.h"

namespace kcache {

// The lookups the fast path shares (fast_path_server.h), validated as the gRPC calls validate
// them; the callers count. The entries under `request.key1` (InvalidArgument when it is not 32
// bytes; `all` and paging are gRPC's alone), into `response`:
absl::Status ListObjectsByKey(objects::ObjectCache& cache, const v1::ListObjectsRequest& request,
                              v1::ListObjectsResponse* response);
// One entry's bundle, checksum verified (InvalidArgument for a malformed key1 or entry_id,
// NotFound when absent or corrupt).
absl::StatusOr<std::string> GetObjectBytes(objects::ObjectCache& cache,
                                           const v1::GetObjectRequest& request);
// Notes that the bundle `request` names was served again from above the cache (the fast
// path's arena): ObjectCache::RecordUse. Nothing for a malformed request.
void RecordObjectUse(objects::ObjectCache& cache, const v1::GetObjectRequest& request);

// The most one PutObject holds at once, in multiples of its size: its bundle as received, then,
// while the store writes it, the encoded value in RocksDB's write batch beside the memtable's
// copy of it (the bundle is moved down and freed once encoded: Store::PutOwned). gRPC's buffers
// for a call (a message or two, about 1 MiB each) come beside it.
inline constexpr uint64_t kUploadCopies = 2;
// What an upload announcing `size` bytes takes from --object-upload-max-bytes.
inline constexpr uint64_t UploadHolds(uint64_t size) { return kUploadCopies * size; }

// The object service's bounds (docs/kcached.md; each refusal counted in objects.*).
struct ObjectServiceLimits {
  // --object-max-bytes: a PutObject stream announcing or sending more is refused
  // (RESOURCE_EXHAUSTED) before it is buffered.
  uint64_t max_object_bytes = objects::kDefaultMaxObjectBytes;
  // --object-upload-max-bytes: the bytes every PutObject in flight together may hold; an
  // upload that would pass it is refused (RESOURCE_EXHAUSTED, retry later) before its bytes are
  // read. Each upload takes UploadHolds(its announced size) when it starts and gives it back
  // when it ends. At least UploadHolds(max_object_bytes) (the flags check it).
  uint64_t max_upload_bytes = uint64_t{512} << 20;
  // --object-entry-max-bytes: an entry's metadata (key1, entry id, source path, manifest, key
  // fields) as sent; a larger one is refused (RESOURCE_EXHAUSTED). Listings page by it: an
  // entry stored before this bound that is larger is left out of `kcache export` listings.
  uint64_t max_entry_bytes = uint64_t{1} << 20;
};

// Thread-safe. `cache` is borrowed and must outlive the service and its calls (the daemon
// shuts the gRPC server down before destroying the stores).
class ObjectCacheService final : public v1::ObjectCache::Service {
 public:
  // Lookups, objects served and stored and puts refused are counted in `counts` (objects.*
  // statistics; borrowed), and what uploads in flight hold now (UploadHolds of each) in
  // objects.upload_bytes.
  // `turns` (borrowed) serves AwaitCompile; it must outlive the service too. An entry put is
  // recorded as put by the peer `peers` (borrowed, outlives the service) says the call came
  // from, "via kcached on `node`" (this host's name).
  ObjectCacheService(objects::ObjectCache* cache, objects::CompileTurns* turns,
                     ObjectServiceLimits limits, Statistics* counts, const PeerDirectory* peers,
                     std::string node)
      : cache_(cache),
        turns_(turns),
        limits_(limits),
        counts_(counts),
        peers_(peers),
        node_(std::move(node)),
        uploads_(limits.max_upload_bytes, counts, Statistic::kObjectUploadBytes) {}

  grpc::Status ListObjects(grpc::ServerContext* context, const v1::ListObjectsRequest* request,
                           v1::ListObjectsResponse* response) override;
  grpc::Status GetObject(grpc::ServerContext* context, const v1::GetObjectRequest* request,
                         grpc::ServerWriter<v1::ObjectChunk>* writer) override;
  grpc::Status PutObject(grpc::ServerContext* context,
                         grpc::ServerReader<v1::PutObjectRequest>* reader,
                         v1::PutObjectResponse* response) override;
  grpc::Status AwaitCompile(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::AwaitCompileUpdate, v1::AwaitCompileRequest>* stream) override;

 private:
  // The entry the first message announces, checked against the bounds (counted when refused).
  absl::StatusOr<ObjectEntry> CheckedEntry(const v1::PutObjectRequest& first);

  objects::ObjectCache* cache_;
  objects::CompileTurns* turns_;
  const ObjectServiceLimits limits_;
  Statistics* counts_;
  const PeerDirectory* peers_;
  const std::string node_;
  ByteBudget uploads_;  // UploadHolds of each PutObject call in flight
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_OBJECT_CACHE_SERVICE_H_
