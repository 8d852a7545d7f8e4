// ObjectCacheService: kcached's side of the compiler launchers (service kcache.v1.ObjectCache,
// proto/kcache/v1/objects.proto). It validates and converts requests and calls an ObjectCache
// (engine/objects/tiered_object_cache.h: baked stores first, client-made puts into the
// writable store only) and nothing else. Sync API: store reads and writes block gRPC's sync
// threads, never the KernelCache service's callback threads.
#ifndef KCACHE_DAEMON_SERVICE_OBJECT_CACHE_SERVICE_H_
#define KCACHE_DAEMON_SERVICE_OBJECT_CACHE_SERVICE_H_

#include <cstdint>

#include "daemon/cache/statistics.h"
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

// Thread-safe. `cache` is borrowed and must outlive the service and its calls (the daemon
// shuts the gRPC server down before destroying the stores).
class ObjectCacheService final : public v1::ObjectCache::Service {
 public:
  // `max_object_bytes`: a PutObject stream announcing or sending more is refused
  // (RESOURCE_EXHAUSTED) before it is buffered (--max-object-bytes). Lookups, objects served
  // and stored and puts refused are counted in `counts` (objects.* statistics; borrowed).
  ObjectCacheService(objects::ObjectCache* cache, uint64_t max_object_bytes, Statistics* counts)
      : cache_(cache), max_object_bytes_(max_object_bytes), counts_(counts) {}

  grpc::Status ListObjects(grpc::ServerContext* context, const v1::ListObjectsRequest* request,
                           v1::ListObjectsResponse* response) override;
  grpc::Status GetObject(grpc::ServerContext* context, const v1::GetObjectRequest* request,
                         grpc::ServerWriter<v1::ObjectChunk>* writer) override;
  grpc::Status PutObject(grpc::ServerContext* context,
                         grpc::ServerReader<v1::PutObjectRequest>* reader,
                         v1::PutObjectResponse* response) override;

 private:
  objects::ObjectCache* cache_;
  const uint64_t max_object_bytes_;
  Statistics* counts_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_OBJECT_CACHE_SERVICE_H_
