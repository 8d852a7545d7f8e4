// Warm: one WarmProgress{job} per finished (kernel x target) job, then WarmProgress{summary}.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/manifest.h"
#include "daemon/service/convert.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/kernel_cache_service.h"
#include "daemon/service/request_limits.h"

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

class WarmReactor final : public grpc::ServerWriteReactor<v1::WarmProgress>,
                          private WarmObserver,
                          private TrackedCall {
 public:
  WarmReactor(ArtifactCache* cache, BlockingPool* pool, CallTracker* tracker,
              grpc::CallbackServerContext* context, const ServiceOptions& service,
              const v1::WarmRequest& request)
      : TrackedCall(tracker) {
    CallTracker::Admission admission = tracker_->Enter(this);
    if (admission != CallTracker::Admission::kAdmitted) {
      Finish(RefusedStatus(admission, *tracker_, cache, context));
      return;
    }
    auto manifest = std::make_shared<Manifest>();
    WarmOptions options;
    absl::Status prepared = PrepareWarm(request, service, manifest.get(), &options);
    if (!prepared.ok()) {
      spdlog::info("warm refused: {}", std::string(prepared.message()));
      Finish(ToGrpcStatus(prepared));
      return;
    }
    spdlog::info("warm: {} kernels x {} targets", manifest->kernels.size(), options.targets.size());
    AddRef();  // the background task's reference
    pool->Submit([this, cache, manifest, options = std::move(options)] {
      absl::StatusOr<WarmSummary> summary = cache->Warm(*manifest, options, this);
      if (summary.ok()) {
        spdlog::info("warm done: {} built, {} cached, {} skipped, {} failed in {} ms",
                     summary->built, summary->cached, summary->skipped, summary->failed,
                     summary->wall_micros / 1000);
        v1::WarmProgress last;
        SummaryToProto(*summary, last.mutable_summary());
        Push(std::move(last), grpc::Status::OK);
      } else {
        spdlog::warn("warm failed: {}", std::string(summary.status().message()));
        Push(std::nullopt, ToGrpcStatus(summary.status()));
      }
      Unref();
    });
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {  // the client went away: drop what is queued; the warm itself runs on
        broken_ = true;
        queue_.clear();
        end_ = ToGrpcStatus(absl::CancelledError("client cancelled"));
      }
    }
    WriteNext();
  }

  // The client gave up: finish now; the warm itself runs on (what it builds is stored) and
  // keeps this object alive until it returns.
  void OnCancel() override { CancelNow(absl::CancelledError("call cancelled")); }

  // Shutdown's grace ran out (or OnCancel): drop what is queued and finish with `status` once
  // no write is in flight.
  void CancelNow(const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (broken_) return;
      broken_ = true;
      queue_.clear();
      end_ = ToGrpcStatus(status);
    }
    WriteNext();
  }

  void OnDone() override { Unref(); }

 private:
  // WarmObserver (called from the cache's threads, never concurrently).
  void OnJobDone(const WarmJobResult& result, int done, int total) override {
    v1::WarmProgress progress;
    JobDoneToProto(result, done, total, progress.mutable_job());
    Push(std::move(progress), std::nullopt);
  }

  // Queues a message and/or the final status, and writes if no write is in flight.
  void Push(std::optional<v1::WarmProgress> message, std::optional<grpc::Status> end) {
    {
      absl::MutexLock lock(&mu_);
      if (broken_) return;
      if (message) queue_.push_back(*std::move(message));
      if (end) end_ = *std::move(end);
    }
    WriteNext();
  }

  // Starts the next write, or finishes once the queue is empty and the end is known.
  // gRPC calls are made outside mu_ (a reaction may run inline).
  void WriteNext() {
    bool write = false;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!queue_.empty()) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        writing_ = write = true;
      } else if (end_) {
        finished_ = true;
        finish = end_;
      }
    }
    if (write) StartWrite(&current_);
    if (finish) Finish(*finish);
  }

  absl::Mutex mu_;
  std::deque<v1::WarmProgress> queue_ ABSL_GUARDED_BY(mu_);
  v1::WarmProgress current_;  // the message in flight; written only when !writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<v1::WarmProgress>* NewWarmReactor(ArtifactCache* cache, BlockingPool* pool,
                                                           CallTracker* tracker,
                                                           grpc::CallbackServerContext* context,
                                                           const ServiceOptions& options,
                                                           const v1::WarmRequest& request) {
  return new WarmReactor(cache, pool, tracker, context, options, request);
}

}  // namespace kcache
