#include "daemon/service/kernel_cache_service.h"

#include <spdlog/spdlog.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/manifest.h"
#include "core/protocol.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/wire_convert.h"

namespace kcache {
namespace {

absl::Status CheckFits(const google::protobuf::Message& response, absl::string_view what,
                       absl::string_view instead) {
  size_t size = response.ByteSizeLong();
  if (size <= kMaxUnaryMessageBytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " is ", size, " bytes, over gRPC's 4 MiB message limit; ", instead));
}

std::string ExportComment(const std::vector<SeenKernel>& seen, absl::Time started) {
  // The union of the SMs workers asked for: what the next image build warms for this fleet.
  std::set<Sm> sms;
  for (const SeenKernel& kernel : seen) sms.insert(kernel.devices.begin(), kernel.devices.end());
  std::vector<std::string> archs;
  for (const Sm& sm : sms) archs.push_back(sm.ToString());
  std::string comment = absl::StrCat(
      "Kernels workers asked kcached for since ", absl::FormatTime(started, absl::UTCTimeZone()),
      " (", seen.size(), " kernels), on SMs ", archs.empty() ? "-" : absl::StrJoin(archs, " "),
      ".\nWarm it at the next image build: kcache warm --arch ",
      archs.empty() ? "<archs>" : absl::StrJoin(archs, ","), " <this file>");
  for (const SeenKernel& kernel : seen) {
    std::vector<std::string> devices;
    for (const Sm& sm : kernel.devices) devices.push_back(sm.ToString());
    absl::StrAppend(&comment, "\n  ", kernel.record.spec.name, " ", kernel.record.id.ShortHex(),
                    ": ", kernel.requests, " requests on ",
                    devices.empty() ? "-" : absl::StrJoin(devices, " "));
  }
  return comment;
}

// How long a client refused at a bound waits before it tries again.
constexpr int kRetryAfterMillis = 100;

void AddRetryAfter(grpc::CallbackServerContext* context) {
  context->AddTrailingMetadata(kRetryAfterMetadataKey, std::to_string(kRetryAfterMillis));
}

// A unary call's reactor: leaves the tracker when gRPC is done with it.
class UnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit UnaryReactor(CallTracker* tracker) : tracker_(tracker) {}
  // Enters the tracker; false (and already finished UNAVAILABLE or RESOURCE_EXHAUSTED) when
  // draining or at the bound of calls in flight (unless not `bounded`).
  bool Enter(Statistics* stats, grpc::CallbackServerContext* context, bool bounded = true) {
    CallTracker::Admission admission = tracker_->Enter(nullptr, bounded);
    if (admission == CallTracker::Admission::kAdmitted) return true;
    Finish(RefusedStatus(admission, *tracker_, stats, context));
    return false;
  }
  void OnDone() override {
    CallTracker* tracker = tracker_;
    delete this;
    tracker->Exit();
  }

 private:
  CallTracker* const tracker_;
};

}  // namespace

grpc::Status ShuttingDownStatus() {
  return ToGrpcStatus(
      absl::UnavailableError("kcached is shutting down; retry against the restarted daemon"));
}

grpc::Status RefusedStatus(CallTracker::Admission admission, const CallTracker& tracker,
                           Statistics* stats, grpc::CallbackServerContext* context) {
  if (admission == CallTracker::Admission::kDraining) return ShuttingDownStatus();
  stats->Add(Statistic::kCallsRefusedBusy);
  AddRetryAfter(context);
  return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
      "kcached is busy: ", tracker.limits().max_calls,
      " calls are in flight already (its --max-calls-in-flight bound); retry in a moment, "
      "or raise the bound if this load is expected")));
}

grpc::Status QueuedBytesStatus(const CallTracker& tracker, Statistics* stats,
                               grpc::CallbackServerContext* context) {
  stats->Add(Statistic::kResolveRefusedQueuedBytes);
  AddRetryAfter(context);
  return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
      "kcached is busy: ", tracker.limits().max_queued_bytes >> 20,
      " MiB of artifacts are queued for clients that have not read them yet (its "
      "--queued-max-bytes bound); read your Resolve streams to the end, retry in a moment, or "
      "raise the bound")));
}

absl::Status GraceRanOutStatus() {
  return absl::CancelledError(
      "kcached shut down before this call finished: its shutdown grace "
      "(--shutdown-grace-seconds) ran out; retry against the restarted daemon");
}

KernelCacheService::KernelCacheService(ServiceParts parts, ProgressTicker* ticker,
                                       ServiceOptions options)
    : parts_(parts), ticker_(ticker), options_(std::move(options)) {}

grpc::ServerWriteReactor<grpc::ByteBuffer>* KernelCacheService::Resolve(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return NewResolveReactor(parts_, {ticker_, options_.compile_limit}, context, *request);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* KernelCacheService::ResolveMany(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return NewResolveManyReactor(parts_, {ticker_, options_.compile_limit}, context, *request);
}

grpc::ServerWriteReactor<v1::WarmProgress>* KernelCacheService::Warm(
    grpc::CallbackServerContext* context, const v1::WarmRequest* request) {
  return NewWarmReactor(parts_, context, options_, *request);
}

grpc::ServerUnaryReactor* KernelCacheService::Stat(grpc::CallbackServerContext* context,
                                                   const v1::StatRequest* request,
                                                   v1::StatResponse* response) {
  auto* reactor = new UnaryReactor(parts_.tracker);
  if (!reactor->Enter(parts_.stats, context, /*bounded=*/false)) return reactor;
  uint64_t uptime = static_cast<uint64_t>(absl::ToInt64Seconds(absl::Now() - options_.started));
  SnapshotToProto(parts_.cache->Snapshot(), uptime, response);
  response->set_redis_door(options_.redis_door);
  for (const UncachedOptionCount& counted : parts_.stats->uncached_options().Snapshot()) {
    v1::UncachedOption* option = response->add_uncached_options();
    option->set_reason(std::string(UncachedReasonName(counted.reason)));
    option->set_option(counted.option);
    option->set_count(counted.count);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* KernelCacheService::List(grpc::CallbackServerContext* context,
                                                   const v1::ListRequest* request,
                                                   v1::ListResponse* response) {
  auto* reactor = new UnaryReactor(parts_.tracker);
  if (!reactor->Enter(parts_.stats, context)) return reactor;
  parts_.pool->Submit([this, reactor, request, response] {  // a scan of every store: may block
    absl::StatusOr<std::vector<ListedKernelInfo>> kernels = parts_.cache->List();
    if (!kernels.ok()) {
      spdlog::warn("list failed: {}", std::string(kernels.status().message()));
      reactor->Finish(ToGrpcStatus(kernels.status()));
      return;
    }
    if (request->paged()) {  // about 1 MiB a page: fits whatever the stores hold
      ListedPageToProto(*std::move(kernels), request->page_after(), response);
      reactor->Finish(grpc::Status::OK);
      return;
    }
    ListedToProto(*kernels, response);
    absl::Status fits = CheckFits(*response, "the list of kernels",
                                  "run `kcache ls --store DIR` on the daemon's host instead");
    if (!fits.ok()) response->Clear();
    reactor->Finish(ToGrpcStatus(fits));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KernelCacheService::ExportManifest(
    grpc::CallbackServerContext* context, const v1::ExportManifestRequest* request,
    v1::ExportManifestResponse* response) {
  auto* reactor = new UnaryReactor(parts_.tracker);
  if (!reactor->Enter(parts_.stats, context)) return reactor;
  parts_.pool->Submit([this, reactor, response] {
    std::vector<SeenKernel> seen = parts_.cache->Seen();
    std::vector<KernelRecord> records;
    records.reserve(seen.size());
    for (const SeenKernel& kernel : seen) records.push_back(kernel.record);
    response->set_manifest_yaml(WriteManifest(records, ExportComment(seen, options_.started)));
    response->set_kernels(static_cast<uint32_t>(records.size()));
    absl::Status fits = CheckFits(*response, "the manifest",
                                  "restart the daemon to clear what it has seen, or warm "
                                  "from the bundled manifest");
    if (!fits.ok()) response->Clear();
    spdlog::info("export-manifest: {} kernels", records.size());
    reactor->Finish(ToGrpcStatus(fits));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KernelCacheService::BuildFromPtx(grpc::CallbackServerContext* context,
                                                           const v1::BuildFromPtxRequest* request,
                                                           v1::BuildFromPtxResponse* response) {
  auto* reactor = new UnaryReactor(parts_.tracker);
  if (!reactor->Enter(parts_.stats, context)) return reactor;
  if (absl::Status valid = ValidateBuildFromPtxRequest(*request); !valid.ok()) {
    parts_.stats->Add(Statistic::kPtxBuildsRefused);
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  Peer who = parts_.peers->Who(context->peer());
  parts_.pool->Submit([this, reactor, request, response, account = std::move(who.account)] {
    PtxBuildRequest build{request->ptx(), DeviceFromProto(request->device()), request->client(),
                          account};
    absl::StatusOr<PtxBuildQueued> queued = parts_.cache->BuildFromPtx(build);
    if (queued.ok()) {
      response->set_module_id(std::string(queued->module.Bytes()));
      response->set_target(queued->target.ToString());
      switch (queued->state) {
        case PtxBuildQueued::State::kQueued:
          response->set_state(v1::PTX_BUILD_STATE_QUEUED);
          break;
        case PtxBuildQueued::State::kAlreadyQueued:
          response->set_state(v1::PTX_BUILD_STATE_ALREADY_QUEUED);
          break;
        case PtxBuildQueued::State::kHeld:
          response->set_state(v1::PTX_BUILD_STATE_HELD);
          break;
      }
    }
    reactor->Finish(ToGrpcStatus(queued.status()));
  });
  return reactor;
}

}  // namespace kcache
