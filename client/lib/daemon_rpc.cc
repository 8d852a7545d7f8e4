#include "client/lib/daemon_rpc.h"

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/lib/wire.h"
#include "core/artifact.h"

namespace kcache::client {
namespace {

// gRPC is initialized once and never shut down by libkcache: with gRPC 1.51 the full shutdown
// that runs when the last gRPC object goes away can block for ~10 s, and a worker must not
// stall because it dropped its Client.
void KeepGrpcInitialized() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  (void)initialized;
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  KeepGrpcInitialized();
  grpc::ChannelArguments args;
  // A restarted daemon is found within a second, not after gRPC's default back-off (up to
  // two minutes). The circuit breaker decides how often the daemon is tried at all.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(GrpcTarget(address), grpc::InsecureChannelCredentials(), args);
}

void SetDeadline(grpc::ClientContext* context, absl::Time deadline) {
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
}

absl::Status BrokenStream(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("kcached sent a broken Resolve stream: ", what, "; the artifact was discarded"));
}

// Appends one streamed part to the artifact being reassembled.
absl::Status TakePart(const v1::ResolveResponse& part, bool* have_header, FetchedKernel* kernel,
                      v1::ArtifactHeader* header) {
  if (part.has_header()) {
    if (*have_header) return BrokenStream("a second header");
    if (part.header().size() > kMaxArtifactBytes) {
      return BrokenStream(absl::StrCat("the header announces ", part.header().size(),
                                       " bytes, more than the ", kMaxArtifactBytes, "-byte limit"));
    }
    *have_header = true;
    *header = part.header();
    *kernel = FromWireHeader(*header);
    kernel->bytes.reserve(header->size());
    return absl::OkStatus();
  }
  if (!*have_header) return BrokenStream("a chunk before the header");
  if (kernel->bytes.size() + part.chunk().size() > header->size()) {
    return BrokenStream(absl::StrCat("more bytes than the ", header->size(), " announced"));
  }
  kernel->bytes.append(part.chunk());
  return absl::OkStatus();
}

absl::Status CheckComplete(bool have_header, const v1::ArtifactHeader& header,
                           const FetchedKernel& kernel) {
  if (!have_header) return BrokenStream("no header");
  if (kernel.bytes.size() != header.size()) {
    return BrokenStream(absl::StrCat("got ", kernel.bytes.size(), " of ", header.size(), " bytes"));
  }
  uint64_t checksum = PayloadChecksum(kernel.bytes);
  if (checksum != header.checksum()) {
    return BrokenStream(absl::StrCat("XXH3-64 checksum ", absl::Hex(checksum, absl::kZeroPad16),
                                     " of ", kernel.bytes.size(), " bytes does not match ",
                                     absl::Hex(header.checksum(), absl::kZeroPad16),
                                     " in the header"));
  }
  return absl::OkStatus();
}

}  // namespace

DaemonConnection::DaemonConnection(std::string address)
    : address_(std::move(address)),
      channel_(NewChannel(address_)),
      stub_(std::make_shared<v1::KernelCache::Stub>(channel_)) {
  absl::MutexLock lock(&mu_);
  channel_->GetState(/*try_to_connect=*/true);  // start connecting now, without waiting
}

std::shared_ptr<v1::KernelCache::Stub> DaemonConnection::stub() {
  absl::MutexLock lock(&mu_);
  return stub_;
}

void DaemonConnection::RenewIfFailed() {
  absl::MutexLock lock(&mu_);
  if (channel_->GetState(false) != GRPC_CHANNEL_TRANSIENT_FAILURE) return;
  channel_ = NewChannel(address_);
  stub_ = std::make_shared<v1::KernelCache::Stub>(channel_);
}

absl::Status DaemonConnection::Described(const absl::Status& status) const {
  if (status.ok() || !IsDaemonFailure(status)) return status;
  std::string hint;
  if (status.code() == absl::StatusCode::kUnavailable) {
    hint = "; is kcached running there? (start it, or pass another address)";
  } else if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    hint = "; the daemon did not answer in time";
  }
  return absl::Status(status.code(),
                      absl::StrCat("kcached at ", address_, ": ", status.message(), hint));
}

absl::StatusOr<FetchedKernel> DaemonConnection::Resolve(const v1::ResolveRequest& request,
                                                        absl::Time deadline) {
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  std::shared_ptr<v1::KernelCache::Stub> s = stub();
  std::unique_ptr<grpc::ClientReader<v1::ResolveResponse>> reader = s->Resolve(&context, request);
  v1::ResolveResponse part;
  v1::ArtifactHeader header;
  FetchedKernel kernel;
  bool have_header = false;
  absl::Status broken;
  while (reader->Read(&part)) {
    broken = TakePart(part, &have_header, &kernel, &header);
    if (!broken.ok()) {
      context.TryCancel();
      while (reader->Read(&part)) {
      }
      break;
    }
  }
  absl::Status finished = FromGrpc(reader->Finish());
  if (!broken.ok()) return Described(broken);
  if (!finished.ok()) return Described(finished);
  if (absl::Status s = CheckComplete(have_header, header, kernel); !s.ok()) return Described(s);
  return kernel;
}

absl::StatusOr<DaemonStats> DaemonConnection::Stat(absl::Time deadline) {
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  v1::StatResponse response;
  absl::Status s = FromGrpc(stub()->Stat(&context, v1::StatRequest(), &response));
  if (!s.ok()) return Described(s);
  DaemonStats stats;
  for (const v1::Counter& c : response.counters()) {
    stats.counters.push_back({c.name(), c.help(), c.value()});
  }
  stats.store_artifacts = response.store_artifacts();
  stats.store_bytes = response.store_bytes();
  stats.memory_bytes = response.memory_bytes();
  stats.memory_entries = response.memory_entries();
  stats.toolkits.assign(response.toolkits().begin(), response.toolkits().end());
  stats.uptime_seconds = response.uptime_seconds();
  return stats;
}

absl::StatusOr<std::vector<ListedKernel>> DaemonConnection::List(absl::Time deadline) {
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  v1::ListResponse response;
  absl::Status s = FromGrpc(stub()->List(&context, v1::ListRequest(), &response));
  if (!s.ok()) return Described(s);
  std::vector<ListedKernel> kernels;
  for (const v1::ListedKernel& k : response.kernels()) {
    ListedKernel out;
    out.kernel_id = absl::BytesToHexString(k.kernel_id());
    out.name = k.name();
    out.min_arch = static_cast<int>(k.min_arch());
    out.max_arch = static_cast<int>(k.max_arch());
    for (const v1::ListedArtifact& a : k.artifacts()) {
      out.artifacts.push_back(
          {FromWire(a.kind()), a.target(), a.toolkit(), a.size(), FromWire(a.tier())});
    }
    kernels.push_back(std::move(out));
  }
  return kernels;
}

absl::StatusOr<ExportedManifest> DaemonConnection::ExportManifest(absl::Time deadline) {
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  v1::ExportManifestResponse response;
  absl::Status s =
      FromGrpc(stub()->ExportManifest(&context, v1::ExportManifestRequest(), &response));
  if (!s.ok()) return Described(s);
  return ExportedManifest{response.manifest_yaml(), response.kernels()};
}

absl::StatusOr<WarmTotals> DaemonConnection::Warm(
    const v1::WarmRequest& request, absl::Time deadline,
    const std::function<void(const WarmJobEvent&)>& on_job) {
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  std::unique_ptr<grpc::ClientReader<v1::WarmProgress>> reader = stub()->Warm(&context, request);
  v1::WarmProgress progress;
  WarmTotals totals;
  bool have_summary = false;
  while (reader->Read(&progress)) {
    if (progress.has_job()) {
      const v1::WarmJobDone& j = progress.job();
      WarmJobEvent event{j.kernel_name(), j.target(), j.outcome(),
                         j.micros(),      j.bytes(),  {j.kinds().begin(), j.kinds().end()},
                         j.message(),     j.done(),   j.total()};
      if (on_job) on_job(event);
    } else if (progress.has_summary()) {
      const v1::WarmSummary& s = progress.summary();
      totals = {s.built(), s.cached(), s.skipped(), s.failed(), s.wall_micros()};
      have_summary = true;
    }
  }
  absl::Status s = FromGrpc(reader->Finish());
  if (!s.ok()) return Described(s);
  if (!have_summary) {
    return absl::DataLossError(
        absl::StrCat("kcached at ", address_, " ended the Warm stream without a summary"));
  }
  return totals;
}

}  // namespace kcache::client
