// Resolve, served raw: one ArtifactHeader, then the payload in chunks of at most kChunkBytes,
// in order. Each chunk goes out as a ResolveResponse{chunk} framed here (tag and length) around
// a slice of the cached artifact's bytes: every call streaming an artifact shares its one copy,
// which the slices keep alive until gRPC has sent them. While a call streams, it holds one
// chunk of the bound of bytes queued for clients (CallTracker::ReserveQueued).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/protocol.h"
#include "daemon/service/convert.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/kernel_cache_service.h"
#include "daemon/service/request_limits.h"

namespace kcache {
namespace {

using ::google::protobuf::internal::WireFormatLite;

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

absl::Status ParseRequest(const grpc::ByteBuffer& raw, v1::ResolveRequest* request) {
  grpc::ByteBuffer copy(raw);  // Deserialize consumes its buffer; the slices are shared
  if (grpc::SerializationTraits<v1::ResolveRequest>::Deserialize(&copy, request).ok()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "the Resolve request does not parse as a kcache.v1.ResolveRequest; build it from "
      "proto/kcache/v1/kcache.proto");
}

grpc::ByteBuffer HeaderMessage(const Served& served) {
  v1::ResolveResponse message;
  HeaderFromServed(served, message.mutable_header());
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<v1::ResolveResponse>::Serialize(message, &buffer, &own);
  return buffer;
}

// ResolveResponse{chunk = artifact bytes [offset, offset + n)}: the framing is copied, the
// bytes are not; the payload slice holds a reference to the artifact.
grpc::ByteBuffer ChunkMessage(const std::shared_ptr<const Artifact>& artifact, size_t offset,
                              size_t n) {
  using ::google::protobuf::io::CodedOutputStream;
  uint8_t framing[16];
  uint8_t* end = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(v1::ResolveResponse::kChunkFieldNumber,
                              WireFormatLite::WIRETYPE_LENGTH_DELIMITED),
      framing);
  end = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(n), end);
  auto* owner = new std::shared_ptr<const Artifact>(artifact);
  grpc::Slice slices[2] = {
      grpc::Slice(framing, static_cast<size_t>(end - framing)),
      grpc::Slice(
          const_cast<char*>(artifact->bytes.data() + offset), n,
          [](void* p) { delete static_cast<std::shared_ptr<const Artifact>*>(p); }, owner)};
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer ProgressMessage(v1::ResolveProgress progress) {
  v1::ResolveResponse message;
  *message.mutable_progress() = std::move(progress);
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<v1::ResolveResponse>::Serialize(message, &buffer, &own);
  return buffer;
}

// Lifetime: deleted when gRPC (OnDone), the background task and the progress ticker are all
// done with it. The call finishes exactly once: with the cache's answer, or earlier when it is
// cancelled (the client gave up, or shutdown's grace ran out) while the cache still works on
// it. One write is in flight at a time: progress while the cache works (want_progress), then
// the header and the chunks; a finish that comes while a write is out waits for its reaction.
class ResolveReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                             private TrackedCall {
 public:
  ResolveReactor(ArtifactCache* cache, BlockingPool* pool, CallTracker* tracker,
                 const ProgressSource& progress, grpc::CallbackServerContext* context,
                 const grpc::ByteBuffer& raw)
      : TrackedCall(tracker), cache_(cache), context_(context), progress_(progress) {
    CallTracker::Admission admission = tracker_->Enter(this);
    if (admission != CallTracker::Admission::kAdmitted) {
      FinishOnce(RefusedStatus(admission, *tracker_, cache, context));
      return;
    }
    absl::Time arrived = absl::Now();
    v1::ResolveRequest request;
    absl::Status valid = ParseRequest(raw, &request);
    if (valid.ok()) valid = ValidateResolveRequest(request);
    if (!valid.ok()) {
      cache->RecordRefused(absl::Now() - arrived);
      spdlog::info("resolve refused: {}", FirstLine(valid.message()));
      FinishOnce(ToGrpcStatus(valid));
      return;
    }
    // The client now knows the daemon took the call: a deadline that passes from here on
    // is a slow answer (a compile), not a daemon that is away.
    context->AddInitialMetadata(kAcceptedMetadataKey, "1");
    StartSendInitialMetadata();
    accepted_ = arrived;
    AddRef();  // the background task's reference
    ResolveQuery query = QueryFromProto(request);
    query.still_wanted = [gave_up = gave_up_] { return !gave_up->load(); };
    if (request.want_progress() && progress_.ticker != nullptr) {
      query.waits_for_compile = [this] { StartProgress(); };
      query.compile_watch = &compile_watch_;
    }
    pool->Submit([this, query = std::move(query)] {
      Serve(cache_->Resolve(query), query);
      Unref();
    });
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    bool header = false;
    bool next = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {  // the client went away
        gave_up_->store(true);
        finish = ToGrpcStatus(absl::CancelledError("client cancelled"));
      } else if (pending_finish_) {
        finish = *pending_finish_;
      } else if (gave_up_->load()) {  // cancelled while a progress write was out
        finish = ToGrpcStatus(absl::CancelledError("call cancelled"));
      } else if (answered_ && !header_sent_) {  // a progress write went out before the answer
        header_sent_ = writing_ = header = true;
      } else {
        next = header_sent_;
      }
    }
    if (finish) FinishOnce(*finish);
    if (header) StartWrite(&message_);
    if (next) WriteNext();
  }

  void OnCancel() override { CancelNow(absl::CancelledError("call cancelled")); }

  void CancelNow(const absl::Status& status) override {
    gave_up_->store(true);  // a compile only this call waits for leaves the queue
    {
      absl::MutexLock lock(&mu_);
      if (writing_) return;  // the write fails and OnWriteDone finishes
    }
    FinishOnce(ToGrpcStatus(status));
  }

  void OnDone() override { Unref(); }

 private:
  ~ResolveReactor() override {
    if (reserved_ > 0) tracker_->ReleaseQueued(reserved_);
  }

  // The answer waits for a compile: tell the client now, and every kProgressInterval until
  // the answer (on the background task's thread, which holds a reference meanwhile).
  void StartProgress() {
    AddRef();  // the ticker's reference
    progress_.ticker->Every([this] { return SendProgress(); }, [this] { Unref(); });
  }

  // False once the call no longer waits (answered, finished or given up).
  bool SendProgress() {
    if (gave_up_->load()) return false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || answered_) return false;
      if (writing_) return true;  // the last one is still going out
      writing_ = true;
    }
    progress_message_ = ProgressMessage(progress_.Make(accepted_, &compile_watch_));
    StartWrite(&progress_message_);
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
      FinishOnce(ToGrpcStatus(served.status()));
      return;
    }
    if (served->artifact == nullptr) {
      FinishOnce(ToGrpcStatus(absl::InternalError("the cache served no artifact")));
      return;
    }
    spdlog::debug("resolve {}: {} {} ({}) from {}", Describe(query),
                  std::string(ServeRuleName(served->rule)), served->artifact->meta.key.ToString(),
                  served->reason, std::string(CacheTierName(served->tier)));
    // One chunk in flight at a time: the call holds that much of the bound until it ends.
    uint64_t chunk = std::min<uint64_t>(kChunkBytes, served->artifact->bytes.size());
    if (chunk > 0 && !tracker_->ReserveQueued(chunk)) {
      spdlog::debug("resolve {} refused: {} MiB queued for slow readers (--max-queued-mb)",
                    Describe(query), tracker_->limits().max_queued_bytes >> 20);
      FinishOnce(QueuedBytesStatus(*tracker_, cache_, context_));
      return;
    }
    reserved_ = chunk;
    artifact_ = served->artifact;
    message_ = HeaderMessage(*served);
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;  // cancelled while the cache worked
      answered_ = true;
      if (writing_) return;  // a progress write is out: its reaction sends the header
      header_sent_ = writing_ = true;
    }
    StartWrite(&message_);  // (no buffer_hint: OnWriteDone would wait for the next write)
  }

  // Called after each write of the answer completes: the next chunk, or the end.
  void WriteNext() {
    size_t size = artifact_->bytes.size();
    if (offset_ >= size) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      writing_ = true;
    }
    size_t n = std::min(kChunkBytes, size - offset_);
    message_ = ChunkMessage(artifact_, offset_, n);
    offset_ += n;
    StartWrite(&message_);
  }

  // gRPC calls are made outside mu_ (a reaction may run inline).
  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (writing_) {  // a progress write is out: its reaction finishes
        if (!pending_finish_) pending_finish_ = status;
        return;
      }
      finished_ = true;
    }
    Finish(status);
  }

  ArtifactCache* const cache_;
  grpc::CallbackServerContext* const context_;
  const ProgressSource progress_;
  absl::Time accepted_;         // set before the background task starts
  CompileWatch compile_watch_;  // where the compile the answer waits for is
  // Set when the call is cancelled or its client went away: read by the compile queue
  // (ResolveQuery::still_wanted), which may outlive this reactor.
  const std::shared_ptr<std::atomic<bool>> gave_up_ = std::make_shared<std::atomic<bool>>(false);
  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;     // Finish was called
  bool writing_ ABSL_GUARDED_BY(mu_) = false;      // a write is in flight
  bool answered_ ABSL_GUARDED_BY(mu_) = false;     // artifact_ and message_ hold the answer
  bool header_sent_ ABSL_GUARDED_BY(mu_) = false;  // its header write has started
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Artifact> artifact_;  // set once, before answered_
  grpc::ByteBuffer message_;                  // the answer's message in flight
  grpc::ByteBuffer progress_message_;         // the progress message in flight
  size_t offset_ = 0;                         // payload bytes already written
  uint64_t reserved_ = 0;                     // of the tracker's queued-bytes bound
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* NewResolveReactor(
    ArtifactCache* cache, BlockingPool* pool, CallTracker* tracker, const ProgressSource& progress,
    grpc::CallbackServerContext* context, const grpc::ByteBuffer& request) {
  return new ResolveReactor(cache, pool, tracker, progress, context, request);
}

}  // namespace kcache
