// KernelCacheService: the gRPC front end of kcached (service kcache.v1.KernelCache, callback
// API). It validates requests (request_limits.h), converts them (convert.h), calls the
// ArtifactCache and nothing beneath it, and maps errors in one place (grpc_status.h).
// Blocking cache calls run on a BlockingPool, never on gRPC's callback threads. Resolve and
// ResolveMany are served raw (ByteBuffers): their chunks are slices of the cached artifact's
// bytes, shared by every call that streams them, never copied per call. The three streams write
// through one StreamWriter (stream_writer.h).
#ifndef KCACHE_DAEMON_SERVICE_KERNEL_CACHE_SERVICE_H_
#define KCACHE_DAEMON_SERVICE_KERNEL_CACHE_SERVICE_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/cache/artifact_cache.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/blocking_pool.h"
#include "daemon/service/call_tracker.h"
#include "daemon/service/peer_identity.h"
#include "daemon/service/progress_ticker.h"
#include "kcache/v1/kcache.grpc.pb.h"

namespace kcache {

struct ServiceOptions {
  // The compiling toolkit's supported archs (Warm validates its targets against them) and
  // display name; empty when the daemon has no toolkit (Warm answers FAILED_PRECONDITION).
  std::vector<int> supported_archs;
  std::string toolkit_name;
  int default_warm_jobs = 0;  // WarmRequest.jobs == 0 uses this (0: one per core)
  absl::Time started = absl::Now();
  // --compile-timeout-seconds, as ResolveProgress tells it; 0 or infinite = no limit.
  absl::Duration compile_limit = absl::ZeroDuration();
  // The Redis door's address for clients (StatResponse.redis_door); "" when it is off.
  std::string redis_door;
};

using KernelCacheServiceBase = v1::KernelCache::WithRawCallbackMethod_Resolve<
    v1::KernelCache::WithRawCallbackMethod_ResolveMany<v1::KernelCache::WithCallbackMethod_Warm<
        v1::KernelCache::WithCallbackMethod_Stat<v1::KernelCache::WithCallbackMethod_List<
            v1::KernelCache::WithCallbackMethod_ExportManifest<
                v1::KernelCache::WithCallbackMethod_BuildFromPtx<v1::KernelCache::Service>>>>>>>;

// `cache`, `pool`, `tracker` and `ticker` must outlive the service and every call it started:
// the daemon shuts the gRPC server down and drains the pool before destroying them (the ticker
// after the pool: a call still waiting for a compile may start ticking until the pool is gone).
// Every call enters `tracker`: once it drains, new calls are answered UNAVAILABLE; past its bounds
// (calls in flight, bytes queued for slow readers) RESOURCE_EXHAUSTED with kRetryAfterMetadataKey.
// What the service's calls share. Every part must outlive the service and every call it started.
struct ServiceParts {
  ArtifactCache* cache = nullptr;
  // The host's statistics, which the cache counts in too (CacheOptions::statistics): the calls
  // count here what they refuse before asking the cache.
  Statistics* stats = nullptr;
  BlockingPool* pool = nullptr;
  CallTracker* tracker = nullptr;
  // Who each connection is (the per-client share of the PTX build queue is theirs).
  const PeerDirectory* peers = nullptr;
};

class KernelCacheService final : public KernelCacheServiceBase {
 public:
  KernelCacheService(ServiceParts parts, ProgressTicker* ticker, ServiceOptions options);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Resolve(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* ResolveMany(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<v1::WarmProgress>* Warm(grpc::CallbackServerContext* context,
                                                   const v1::WarmRequest* request) override;
  grpc::ServerUnaryReactor* Stat(grpc::CallbackServerContext* context,
                                 const v1::StatRequest* request,
                                 v1::StatResponse* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListRequest* request,
                                 v1::ListResponse* response) override;
  grpc::ServerUnaryReactor* ExportManifest(grpc::CallbackServerContext* context,
                                           const v1::ExportManifestRequest* request,
                                           v1::ExportManifestResponse* response) override;
  grpc::ServerUnaryReactor* BuildFromPtx(grpc::CallbackServerContext* context,
                                         const v1::BuildFromPtxRequest* request,
                                         v1::BuildFromPtxResponse* response) override;

 private:
  const ServiceParts parts_;
  ProgressTicker* const ticker_;
  const ServiceOptions options_;
};

// The streaming reactors (resolve_reactor.cc, resolve_many_reactor.cc, warm_reactor.cc). Each
// deletes itself once gRPC is done with it, its background task has returned and `progress`
// has stopped ticking it.
grpc::ServerWriteReactor<grpc::ByteBuffer>* NewResolveReactor(const ServiceParts& parts,
                                                              const ProgressSource& progress,
                                                              grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer& request);
grpc::ServerWriteReactor<grpc::ByteBuffer>* NewResolveManyReactor(
    const ServiceParts& parts, const ProgressSource& progress, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer& request);
grpc::ServerWriteReactor<v1::WarmProgress>* NewWarmReactor(const ServiceParts& parts,
                                                           grpc::CallbackServerContext* context,
                                                           const ServiceOptions& options,
                                                           const v1::WarmRequest& request);

// The answer to a call that arrives while the daemon shuts down.
grpc::Status ShuttingDownStatus();

// The answer to a call that `admission` refused (kDraining: ShuttingDownStatus; kBusy:
// RESOURCE_EXHAUSTED naming the bound, counted in `stats` (calls.refused_busy), with
// kRetryAfterMetadataKey added to `context`'s trailing metadata).
grpc::Status RefusedStatus(CallTracker::Admission admission, const CallTracker& tracker,
                           Statistics* stats, grpc::CallbackServerContext* context);

// RESOURCE_EXHAUSTED for a Resolve whose payload would pass the bound of bytes queued for
// clients (counted in `stats`: resolve.refused_queued_bytes; kRetryAfterMetadataKey added to
// `context`).
grpc::Status QueuedBytesStatus(const CallTracker& tracker, Statistics* stats,
                               grpc::CallbackServerContext* context);

// The answer to a call still running when shutdown's grace ran out (CANCELLED).
absl::Status GraceRanOutStatus();

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_KERNEL_CACHE_SERVICE_H_
