// Resolve, served raw: one ArtifactHeader, then the payload in chunks of at most kChunkBytes,
// in order. Each chunk is a ResolveResponse{chunk} around a slice of the cached artifact's bytes
// (ChunkMessages): every call streaming an artifact shares its one copy. While a call streams,
// it holds one chunk of the bound of bytes queued for clients (StreamWriter::ReserveQueued).
#include <grpcpp/support/byte_buffer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/protocol.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/kernel_cache_service.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/stream_messages.h"
#include "daemon/service/stream_writer.h"
#include "daemon/service/wire_convert.h"

namespace kcache {
namespace {

std::string FirstLine(absl::string_view text) {
  return std::string(text.substr(0, std::min(text.find('\n'), size_t{200})));
}

std::string Describe(const ResolveQuery& query) {
  std::string kernel = query.record ? query.record->spec.name + " " + query.record->id.ShortHex()
                       : query.id   ? query.id->ShortHex()
                                    : "name " + query.name;
  return absl::StrCat(kernel, " for ", query.device.sm.ToString(),
                      query.client.empty() ? "" : " from " + query.client.substr(0, 64));
}

// Lifetime: deleted when gRPC (OnDone), the background task and the progress ticker are all
// done with it. Progress goes out while the cache works (want_progress), between writes; the
// answer is the header and the chunks, queued at once, then the end (StreamWriter).
class ResolveReactor final : public StreamWriter<grpc::ByteBuffer> {
 public:
  ResolveReactor(const ServiceParts& parts, const ProgressSource& progress,
                 grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw)
      : StreamWriter(parts.tracker),
        cache_(parts.cache),
        stats_(parts.stats),
        context_(context),
        progress_(progress) {
    CallTracker::Admission admission = tracker_->Enter(this);
    if (admission != CallTracker::Admission::kAdmitted) {
      End(RefusedStatus(admission, *tracker_, stats_, context));
      return;
    }
    absl::Time arrived = absl::Now();
    v1::ResolveRequest request;
    absl::Status parsed = ParseRawRequest(raw, &request);
    absl::StatusOr<ResolveQuery> query =
        parsed.ok() ? CheckedQueryFromProto(request) : absl::StatusOr<ResolveQuery>(parsed);
    if (!query.ok()) {
      stats_->RecordInvalidRequest(absl::Now() - arrived);
      spdlog::info("resolve refused: {}", FirstLine(query.status().message()));
      End(ToGrpcStatus(query.status()));
      return;
    }
    // The client now knows the daemon took the call: a deadline that passes from here on
    // is a slow answer (a compile), not a daemon that is away.
    context->AddInitialMetadata(kAcceptedMetadataKey, "1");
    StartSendInitialMetadata();
    accepted_ = arrived;
    AddRef();  // the background task's reference
    query->still_wanted = [gave_up = gave_up()] { return !gave_up->load(); };
    if (request.want_progress() && progress_.ticker != nullptr) {
      query->waits_for_compile = [this] { StartProgress(); };
      query->compile_watch = &compile_watch_;
    }
    parts.pool->Submit([this, query = *std::move(query)] {
      Serve(cache_->Resolve(query), query);
      Unref();
    });
  }

 private:
  // The answer waits for a compile: tell the client now, and every kProgressInterval until
  // the answer (on the background task's thread, which holds a reference meanwhile).
  void StartProgress() {
    AddRef();  // the ticker's reference
    progress_.ticker->Every([this] { return DueProgress(); }, [this] { Unref(); });
  }

  // False once the call no longer waits (answered, ended or given up).
  bool DueProgress() {
    {
      absl::MutexLock lock(&mu_);
      if (Over()) return false;
      progress_due_ = true;
    }
    Kick();
    return true;
  }

  bool NextIdle(grpc::ByteBuffer* message) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!progress_due_) return false;
    progress_due_ = false;
    v1::ResolveResponse progress;
    *progress.mutable_progress() = progress_.Make(accepted_, &compile_watch_);
    *message = RawMessage(progress);
    return true;
  }

  void Serve(absl::StatusOr<Served> served, const ResolveQuery& query) {
    if (!served.ok()) {
      absl::StatusCode code = served.status().code();
      if (code == absl::StatusCode::kNotFound || code == absl::StatusCode::kInvalidArgument) {
        spdlog::info("resolve {}: {}", Describe(query), FirstLine(served.status().message()));
      } else {
        spdlog::warn("resolve {} failed: {}", Describe(query),
                     FirstLine(served.status().message()));
      }
      End(ToGrpcStatus(served.status()));
      return;
    }
    if (served->artifact == nullptr) {
      End(ToGrpcStatus(absl::InternalError("the cache served no artifact")));
      return;
    }
    spdlog::debug("resolve {}: {} {} ({}) from {}", Describe(query),
                  std::string(ServeRuleName(served->rule)), served->artifact->meta.key.ToString(),
                  served->reason, std::string(CacheTierName(served->tier)));
    // One chunk in flight at a time: the call holds that much of the bound until it ends.
    if (!ReserveQueued(std::min<uint64_t>(kChunkBytes, served->artifact->bytes.size()))) {
      spdlog::debug("resolve {} refused: {} MiB queued for slow readers (--queued-max-bytes)",
                    Describe(query), tracker_->limits().max_queued_bytes >> 20);
      End(QueuedBytesStatus(*tracker_, stats_, context_));
      return;
    }
    v1::ResolveResponse header;
    HeaderFromServed(*served, header.mutable_header());
    std::vector<grpc::ByteBuffer> messages =
        ChunkMessages(served->artifact, std::string(), v1::ResolveResponse::kChunkFieldNumber);
    messages.insert(messages.begin(), RawMessage(header));
    Send(std::move(messages), grpc::Status::OK);
  }

  ArtifactCache* const cache_;
  Statistics* const stats_;
  grpc::CallbackServerContext* const context_;
  const ProgressSource progress_;
  absl::Time accepted_;                             // set before the background task starts
  CompileWatch compile_watch_;                      // where the compile the answer waits for is
  bool progress_due_ ABSL_GUARDED_BY(mu_) = false;  // a tick asked for a progress message
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* NewResolveReactor(const ServiceParts& parts,
                                                              const ProgressSource& progress,
                                                              grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer& request) {
  return new ResolveReactor(parts, progress, context, request);
}

}  // namespace kcache
