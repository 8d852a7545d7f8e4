// Warm: one WarmProgress{job} per finished (kernel x target) job, then WarmProgress{summary}.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/manifest.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/kernel_cache_service.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/stream_writer.h"
#include "daemon/service/wire_convert.h"

namespace kcache {
namespace {

// Checks the request and turns it into a manifest and warm options.
absl::Status PrepareWarm(const v1::WarmRequest& request, const ServiceOptions& service,
                         Manifest* manifest, WarmOptions* options) {
  if (absl::Status s = ValidateWarmRequest(request); !s.ok()) return s;
  absl::StatusOr<std::vector<Target>> targets = TargetsFromProto(request.targets());
  if (!targets.ok()) return targets.status();
  if (service.supported_archs.empty()) {
    return absl::FailedPreconditionError(
        "this kcached has no CUDA toolkit loaded (serve-only mode), so it cannot compile; "
        "restart it with --toolkit DIR, or warm a store directly with `kcache warm --store DIR`");
  }
  for (const Target& target : *targets) {
    absl::Status s = ValidateTarget(target, service.supported_archs, service.toolkit_name);
    if (!s.ok()) return s;
  }
  std::vector<KernelRecord> records;
  records.reserve(request.kernels_size());
  for (const v1::KernelSpec& spec : request.kernels()) records.push_back(RecordFromProto(spec));
  *manifest = ManifestFromRecords(std::move(records));
  options->targets = *std::move(targets);
  options->jobs = request.jobs() != 0 ? static_cast<int>(std::min(request.jobs(), 256u))
                                      : service.default_warm_jobs;
  return absl::OkStatus();
}

// The warm itself runs on when the call breaks (what it builds is stored) and keeps this object
// alive until it returns; what it reports then is dropped (StreamWriter).
class WarmReactor final : public StreamWriter<v1::WarmProgress>, private WarmObserver {
 public:
  WarmReactor(const ServiceParts& parts, grpc::CallbackServerContext* context,
              const ServiceOptions& service, const v1::WarmRequest& request)
      : StreamWriter(parts.tracker) {
    CallTracker::Admission admission = tracker_->Enter(this);
    if (admission != CallTracker::Admission::kAdmitted) {
      End(RefusedStatus(admission, *tracker_, parts.stats, context));
      return;
    }
    auto manifest = std::make_shared<Manifest>();
    WarmOptions options;
    absl::Status prepared = PrepareWarm(request, service, manifest.get(), &options);
    if (!prepared.ok()) {
      spdlog::info("warm refused: {}", std::string(prepared.message()));
      End(ToGrpcStatus(prepared));
      return;
    }
    spdlog::info("warm: {} kernels x {} targets", manifest->kernels.size(), options.targets.size());
    AddRef();  // the background task's reference
    parts.pool->Submit([this, cache = parts.cache, manifest, options = std::move(options)] {
      absl::StatusOr<WarmSummary> summary = cache->Warm(*manifest, options, this);
      if (summary.ok()) {
        spdlog::info("warm done: {} built, {} cached, {} skipped, {} failed in {} ms",
                     summary->built, summary->cached, summary->skipped, summary->failed,
                     summary->wall_micros / 1000);
        std::vector<v1::WarmProgress> last(1);
        SummaryToProto(*summary, last[0].mutable_summary());
        Send(std::move(last), grpc::Status::OK);
      } else {
        spdlog::warn("warm failed: {}", std::string(summary.status().message()));
        End(ToGrpcStatus(summary.status()));
      }
      Unref();
    });
  }

 private:
  // WarmObserver (called from the cache's threads, never concurrently).
  void OnJobDone(const WarmJobResult& result, int done, int total) override {
    std::vector<v1::WarmProgress> progress(1);
    JobDoneToProto(result, done, total, progress[0].mutable_job());
    Send(std::move(progress));
  }
};

}  // namespace

grpc::ServerWriteReactor<v1::WarmProgress>* NewWarmReactor(const ServiceParts& parts,
                                                           grpc::CallbackServerContext* context,
                                                           const ServiceOptions& options,
                                                           const v1::WarmRequest& request) {
  return new WarmReactor(parts, context, options, request);
}

}  // namespace kcache
