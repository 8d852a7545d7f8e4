// ResolveMany, served raw: every entry of the request answered on its own, in the order the
// answers are ready. A first pass on one pool thread looks each entry up once (ArtifactCache::
// Find), so every stored kernel is answered before anything waits; the compiles that lookup
// left pending then go to at most kResolveManyCompilesPerCall pool threads, each taking the
// next one when its compile is done. An answer is queued whole: a
// header, then chunks of at most kChunkBytes that are slices of the cached artifact's bytes
// (ChunkMessages), never copied; the call holds one chunk of the queued-bytes bound. While
// entries wait for a compile, each that asked (want_progress) gets a ResolveProgress at once and
// every kProgressInterval, between answers (never inside one).
#include <grpcpp/support/byte_buffer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
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

// The messages that answer entry `index`: an error, or a header and the artifact's chunks.
std::vector<grpc::ByteBuffer> AnswerMessages(uint32_t index, const absl::StatusOr<Served>& served) {
  v1::ResolveManyResponse first;
  first.set_index(index);
  if (!served.ok() || served->artifact == nullptr) {
    grpc::Status status = ToGrpcStatus(
        served.ok() ? absl::InternalError("the cache served no artifact") : served.status());
    first.mutable_error()->set_code(static_cast<int32_t>(status.error_code()));
    first.mutable_error()->set_message(status.error_message());
    return {RawMessage(first)};
  }
  std::string prefix = first.SerializeAsString();  // the fields before a chunk: the index
  HeaderFromServed(*served, first.mutable_header());
  std::vector<grpc::ByteBuffer> messages =
      ChunkMessages(served->artifact, prefix, v1::ResolveManyResponse::kChunkFieldNumber);
  messages.insert(messages.begin(), RawMessage(first));
  return messages;
}

class ResolveManyReactor final : public StreamWriter<grpc::ByteBuffer> {
 public:
  ResolveManyReactor(const ServiceParts& parts, const ProgressSource& progress,
                     grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw)
      : StreamWriter(parts.tracker), cache_(parts.cache), pool_(parts.pool), progress_(progress) {
    CallTracker::Admission admission = tracker_->Enter(this);
    if (admission != CallTracker::Admission::kAdmitted) {
      End(RefusedStatus(admission, *tracker_, parts.stats, context));
      return;
    }
    v1::ResolveManyRequest request;
    absl::Status valid = ParseRawRequest(raw, &request);
    if (valid.ok()) valid = ValidateResolveManyRequest(request);
    if (!valid.ok()) {
      spdlog::info("resolve-many refused: {}", std::string(valid.message()));
      End(ToGrpcStatus(valid));
      return;
    }
    if (!ReserveQueued(kChunkBytes)) {
      End(QueuedBytesStatus(*tracker_, parts.stats, context));
      return;
    }
    context->AddInitialMetadata(kAcceptedMetadataKey, "1");
    StartSendInitialMetadata();
    accepted_ = absl::Now();
    total_ = static_cast<size_t>(request.kernels_size());
    compile_watches_ = std::make_unique<CompileWatch[]>(total_);
    std::vector<std::pair<uint32_t, ResolveQuery>> queries;
    for (int i = 0; i < request.kernels_size(); ++i) {
      const v1::ResolveRequest& entry = request.kernels(i);
      absl::Time arrived = absl::Now();
      absl::StatusOr<ResolveQuery> checked = CheckedQueryFromProto(entry);
      if (!checked.ok()) {
        parts.stats->RecordInvalidRequest(absl::Now() - arrived);
        Push(static_cast<uint32_t>(i), checked.status());
        continue;
      }
      ResolveQuery& query = *checked;
      query.still_wanted = [gave_up = gave_up()] { return !gave_up->load(); };
      if (entry.want_progress() && progress_.ticker != nullptr) {
        wants_progress_.insert(static_cast<uint32_t>(i));
        query.compile_watch = &compile_watches_[i];
      }
      queries.emplace_back(static_cast<uint32_t>(i), std::move(query));
    }
    if (queries.empty()) return;
    AddRef();  // the first pass's reference
    pool_->Submit([this, queries = std::move(queries)]() mutable {
      FirstPass(std::move(queries));
      Unref();
    });
  }

 private:
  // Every entry looked up; the compiles they need are queued for CompileNext.
  void FirstPass(std::vector<std::pair<uint32_t, ResolveQuery>> queries) {
    size_t deferred = 0;
    bool progress = false;
    for (auto& [index, query] : queries) {
      if (gave_up()->load()) return;
      ArtifactCache::Found found = cache_->Find(query);
      if (auto* pending = std::get_if<PendingCompile>(&found)) {
        absl::MutexLock lock(&mu_);
        compiles_.emplace_back(index, std::move(*pending));
        if (wants_progress_.contains(index)) {
          waiting_.insert(index);
          progress = true;
        }
        ++deferred;
        continue;
      }
      Push(index, std::get<absl::StatusOr<Served>>(found));
    }
    if (progress) StartProgress();
    for (size_t i = 0; i < std::min(deferred, kResolveManyCompilesPerCall); ++i) {
      AddRef();  // each compile thread's reference
      pool_->Submit([this] {
        CompileNext();
        Unref();
      });
    }
  }

  // Runs the pending compiles, one after another, until none is left.
  void CompileNext() {
    while (!gave_up()->load()) {
      std::optional<std::pair<uint32_t, PendingCompile>> next;
      {
        absl::MutexLock lock(&mu_);
        if (compiles_.empty()) return;
        next.emplace(std::move(compiles_.front()));
        compiles_.pop_front();
      }
      Push(next->first, cache_->Compile(std::move(next->second)));
    }
  }

  // Queues entry `index`'s answer; the last entry's answer ends the call.
  void Push(uint32_t index, const absl::StatusOr<Served>& served) {
    if (!served.ok()) {
      spdlog::info("resolve-many entry {}: {}", index,
                   std::string(served.status().message().substr(0, 200)));
    }
    std::vector<grpc::ByteBuffer> messages = AnswerMessages(index, served);
    {
      absl::MutexLock lock(&mu_);
      if (Over()) return;
      waiting_.erase(index);
      ++answered_;
      Queue(std::move(messages),
            answered_ == total_ ? std::optional<grpc::Status>(grpc::Status::OK) : std::nullopt);
    }
    Kick();
  }

  // Entries wait for compiles: tell their clients now, and every kProgressInterval until
  // none waits (the ticker holds a reference meanwhile).
  void StartProgress() {
    AddRef();  // the ticker's reference
    progress_.ticker->Every([this] { return DueProgress(); }, [this] { Unref(); });
  }

  // Marks every entry still waiting as due a progress message; false once none waits.
  bool DueProgress() {
    {
      absl::MutexLock lock(&mu_);
      if (Over() || waiting_.empty()) return false;
      if (progress_due_.empty()) progress_due_.assign(waiting_.begin(), waiting_.end());
    }
    Kick();
    return true;
  }

  // A progress message for the next entry that is due one and still waits.
  bool NextIdle(grpc::ByteBuffer* message) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!progress_due_.empty()) {
      uint32_t index = progress_due_.back();
      progress_due_.pop_back();
      if (!waiting_.contains(index)) continue;
      v1::ResolveManyResponse progress;
      progress.set_index(index);
      *progress.mutable_progress() = progress_.Make(accepted_, &compile_watches_[index]);
      *message = RawMessage(progress);
      return true;
    }
    return false;
  }

  ArtifactCache* const cache_;
  BlockingPool* const pool_;
  const ProgressSource progress_;
  absl::Time accepted_;                           // set before any background work starts
  absl::flat_hash_set<uint32_t> wants_progress_;  // entries that asked; set before it too
  size_t total_ = 0;                              // entries; set before it too
  // Per entry: where the compile it waits for is. Set before any background work starts.
  std::unique_ptr<CompileWatch[]> compile_watches_;

  std::deque<std::pair<uint32_t, PendingCompile>> compiles_ ABSL_GUARDED_BY(mu_);
  // Entries that wait for a compile and asked for progress, and those due a message now.
  absl::flat_hash_set<uint32_t> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> progress_due_ ABSL_GUARDED_BY(mu_);
  size_t answered_ ABSL_GUARDED_BY(mu_) = 0;  // answers queued
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* NewResolveManyReactor(
    const ServiceParts& parts, const ProgressSource& progress, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer& request) {
  return new ResolveManyReactor(parts, progress, context, request);
}

}  // namespace kcache
