// ResolveMany: every entry of the request answered on its own, in the order the answers are
// ready. A first pass on one pool thread asks the cache for each entry without compiling
// (ResolveQuery::defer_compile), so every stored kernel is answered before anything waits;
// the entries that need a compile then go to at most kResolveManyCompilesPerCall pool threads,
// each taking the next entry when its compile is done. Answers queue as (index, Served), which
// shares the cached artifact: the messages (a header, then chunks of at most kChunkBytes) are
// made one at a time as gRPC sends them, so a call holds one chunk of the queued-bytes bound.
// While entries wait for a compile, each that asked (want_progress) gets a ResolveProgress at
// once and every kProgressInterval, between answers (never inside one).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/protocol.h"
#include "daemon/service/convert.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/kernel_cache_service.h"
#include "daemon/service/request_limits.h"

namespace kcache {
namespace {

struct Answer {
  uint32_t index = 0;
  absl::StatusOr<Served> served;
};

class ResolveManyReactor final : public grpc::ServerWriteReactor<v1::ResolveManyResponse>,
                                 private TrackedCall {
 public:
  ResolveManyReactor(ArtifactCache* cache, BlockingPool* pool, CallTracker* tracker,
                     const ProgressSource& progress, grpc::CallbackServerContext* context,
                     const v1::ResolveManyRequest& request)
      : TrackedCall(tracker), cache_(cache), pool_(pool), progress_(progress) {
    CallTracker::Admission admission = tracker_->Enter(this);
    if (admission != CallTracker::Admission::kAdmitted) {
      FinishNow(RefusedStatus(admission, *tracker_, cache, context));
      return;
    }
    if (absl::Status valid = ValidateResolveManyRequest(request); !valid.ok()) {
      spdlog::info("resolve-many refused: {}", std::string(valid.message()));
      FinishNow(ToGrpcStatus(valid));
      return;
    }
    if (!tracker_->ReserveQueued(kChunkBytes)) {
      FinishNow(QueuedBytesStatus(*tracker_, cache, context));
      return;
    }
    reserved_ = kChunkBytes;
    context->AddInitialMetadata(kAcceptedMetadataKey, "1");
    StartSendInitialMetadata();
    accepted_ = absl::Now();
    total_ = static_cast<size_t>(request.kernels_size());
    compile_watches_ = std::make_unique<CompileWatch[]>(total_);
    std::vector<std::pair<uint32_t, ResolveQuery>> queries;
    for (int i = 0; i < request.kernels_size(); ++i) {
      const v1::ResolveRequest& entry = request.kernels(i);
      absl::Time arrived = absl::Now();
      if (absl::Status valid = ValidateResolveRequest(entry); !valid.ok()) {
        cache->RecordRefused(absl::Now() - arrived);
        Push(static_cast<uint32_t>(i), valid);
        continue;
      }
      ResolveQuery query = QueryFromProto(entry);
      query.still_wanted = [gave_up = gave_up_] { return !gave_up->load(); };
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

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) Break(absl::CancelledError("client cancelled"));
    }
    WriteNext();
  }

  void OnCancel() override { CancelNow(absl::CancelledError("call cancelled")); }

  void CancelNow(const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (broken_) return;
      Break(status);
    }
    WriteNext();
  }

  void OnDone() override { Unref(); }

 private:
  ~ResolveManyReactor() override {
    if (reserved_ > 0) tracker_->ReleaseQueued(reserved_);
  }

  // Every entry without compiling; those that need a compile are queued for CompileNext.
  void FirstPass(std::vector<std::pair<uint32_t, ResolveQuery>> queries) {
    size_t deferred = 0;
    bool progress = false;
    for (auto& [index, query] : queries) {
      if (gave_up_->load()) return;
      query.defer_compile = true;
      absl::StatusOr<Served> served = cache_->Resolve(query);
      if (!served.ok() && IsCompileDeferred(served.status())) {
        query.defer_compile = false;
        absl::MutexLock lock(&mu_);
        compiles_.emplace_back(index, std::move(query));
        if (wants_progress_.contains(index)) {
          waiting_.insert(index);
          progress = true;
        }
        ++deferred;
        continue;
      }
      Push(index, std::move(served));
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

  // Takes the entries that need a compile, one after another, until none is left.
  void CompileNext() {
    while (!gave_up_->load()) {
      std::pair<uint32_t, ResolveQuery> next;
      {
        absl::MutexLock lock(&mu_);
        if (compiles_.empty()) return;
        next = std::move(compiles_.front());
        compiles_.pop_front();
      }
      Push(next.first, cache_->Resolve(next.second));
    }
  }

  void Push(uint32_t index, absl::StatusOr<Served> served) {
    if (!served.ok()) {
      spdlog::info("resolve-many entry {}: {}", index,
                   std::string(served.status().message().substr(0, 200)));
    }
    {
      absl::MutexLock lock(&mu_);
      if (broken_) return;
      waiting_.erase(index);
      answers_.push_back(Answer{index, std::move(served)});
    }
    WriteNext();
  }

  // Entries wait for compiles: tell their clients now, and every kProgressInterval until
  // none waits (the ticker holds a reference meanwhile).
  void StartProgress() {
    AddRef();  // the ticker's reference
    progress_.ticker->Every([this] { return DueProgress(); }, [this] { Unref(); });
  }

  // Queues a progress message for every entry still waiting; false once none waits.
  bool DueProgress() {
    {
      absl::MutexLock lock(&mu_);
      if (broken_ || finished_ || waiting_.empty()) return false;
      if (progress_due_.empty()) progress_due_.assign(waiting_.begin(), waiting_.end());
    }
    WriteNext();
    return true;
  }

  void Break(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    gave_up_->store(true);  // the compile threads stop; a compile only they wait for is dropped
    broken_ = true;
    answers_.clear();
    streaming_.reset();
    end_ = ToGrpcStatus(status);
  }

  // Makes the next message into current_: the next chunk of the artifact being streamed, or
  // the next answer's header (or error). False when there is nothing to send now.
  bool NextMessage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    current_.Clear();
    if (streaming_ != nullptr) {
      const std::string& bytes = streaming_->bytes;
      size_t n = std::min(kChunkBytes, bytes.size() - offset_);
      current_.set_index(streaming_index_);
      current_.set_chunk(bytes.data() + offset_, n);
      offset_ += n;
      if (offset_ >= bytes.size()) streaming_.reset();
      return true;
    }
    if (answers_.empty()) return NextProgress();
    Answer answer = std::move(answers_.front());
    answers_.pop_front();
    ++answered_;
    current_.set_index(answer.index);
    if (!answer.served.ok() || answer.served->artifact == nullptr) {
      grpc::Status status =
          ToGrpcStatus(answer.served.ok() ? absl::InternalError("the cache served no artifact")
                                          : answer.served.status());
      current_.mutable_error()->set_code(static_cast<int32_t>(status.error_code()));
      current_.mutable_error()->set_message(status.error_message());
      return true;
    }
    HeaderFromServed(*answer.served, current_.mutable_header());
    if (!answer.served->artifact->bytes.empty()) {
      streaming_ = answer.served->artifact;
      streaming_index_ = answer.index;
      offset_ = 0;
    }
    return true;
  }

  // A progress message for the next entry that is due one and still waits.
  bool NextProgress() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!progress_due_.empty()) {
      uint32_t index = progress_due_.back();
      progress_due_.pop_back();
      if (!waiting_.contains(index)) continue;
      current_.set_index(index);
      *current_.mutable_progress() = progress_.Make(accepted_, &compile_watches_[index]);
      return true;
    }
    return false;
  }

  // Starts the next write, or finishes once every entry is answered (or the call broke).
  // gRPC calls are made outside mu_ (a reaction may run inline).
  void WriteNext() {
    bool write = false;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!broken_ && NextMessage()) {
        writing_ = write = true;
      } else if (broken_ || (answered_ == total_ && streaming_ == nullptr)) {
        finished_ = true;
        finish = end_.value_or(grpc::Status::OK);
      }
    }
    if (write) StartWrite(&current_);
    if (finish) Finish(*finish);
  }

  // Before any background work started.
  void FinishNow(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(status);
  }

  ArtifactCache* const cache_;
  BlockingPool* const pool_;
  const ProgressSource progress_;
  absl::Time accepted_;                           // set before any background work starts
  absl::flat_hash_set<uint32_t> wants_progress_;  // entries that asked; set before it too
  // Set when the call is cancelled or its client went away (ResolveQuery::still_wanted).
  const std::shared_ptr<std::atomic<bool>> gave_up_ = std::make_shared<std::atomic<bool>>(false);
  size_t total_ = 0;  // entries; set before any background work starts
  // Per entry: where the compile it waits for is. Set before any background work starts.
  std::unique_ptr<CompileWatch[]> compile_watches_;
  uint64_t reserved_ = 0;  // of the tracker's queued-bytes bound

  absl::Mutex mu_;
  std::deque<std::pair<uint32_t, ResolveQuery>> compiles_ ABSL_GUARDED_BY(mu_);
  std::deque<Answer> answers_ ABSL_GUARDED_BY(mu_);
  // Entries that wait for a compile and asked for progress, and those due a message now.
  absl::flat_hash_set<uint32_t> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> progress_due_ ABSL_GUARDED_BY(mu_);
  size_t answered_ ABSL_GUARDED_BY(mu_) = 0;  // answers taken from answers_ to be sent
  std::shared_ptr<const Artifact> streaming_ ABSL_GUARDED_BY(mu_);  // its chunks are going out
  uint32_t streaming_index_ ABSL_GUARDED_BY(mu_) = 0;
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;
  v1::ResolveManyResponse current_;  // the message in flight; changed only when !writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<v1::ResolveManyResponse>* NewResolveManyReactor(
    ArtifactCache* cache, BlockingPool* pool, CallTracker* tracker, const ProgressSource& progress,
    grpc::CallbackServerContext* context, const v1::ResolveManyRequest& request) {
  return new ResolveManyReactor(cache, pool, tracker, progress, context, request);
}

}  // namespace kcache
