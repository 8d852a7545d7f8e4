// Resolve: one ArtifactHeader, then the payload in chunks of at most kChunkBytes, in order.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/service/convert.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/kernel_cache_service.h"
#include "daemon/service/request_limits.h"

namespace kcache {
namespace {

std::string FirstLine(absl::string_view text) {
  return std::string(text.substr(0, std::min(text.find('\n'), size_t{200})));
}

std::string Describe(const ResolveQuery& query) {
  std::string kernel = query.spec ? query.spec->spec.name + " " + query.spec->id.ShortHex()
                       : query.id ? query.id->ShortHex()
                                  : "name " + query.name;
  return absl::StrCat(kernel, " for ", query.device.sm.ToString(),
                      query.client.empty() ? "" : " from " + query.client.substr(0, 64));
}

// Lifetime: deleted when both gRPC (OnDone) and the background task are done with it. The
// call finishes exactly once: with the cache's answer, or earlier when it is cancelled (the
// client gave up, or shutdown's grace ran out) while the cache still works on it.
class ResolveReactor final : public grpc::ServerWriteReactor<v1::ResolveResponse>,
                             private TrackedCall {
 public:
  ResolveReactor(ArtifactCache* cache, BlockingPool* pool, CallTracker* tracker,
                 const v1::ResolveRequest& request)
      : TrackedCall(tracker) {
    if (!tracker_->Enter()) {
      FinishOnce(ShuttingDownStatus());
      return;
    }
    absl::Time arrived = absl::Now();
    absl::Status valid = ValidateResolveRequest(request);
    if (!valid.ok()) {
      cache->RecordRefused(absl::Now() - arrived);
      spdlog::info("resolve refused: {}", FirstLine(valid.message()));
      FinishOnce(ToGrpcStatus(valid));
      return;
    }
    AddRef();  // the background task's reference
    pool->Submit([this, cache, query = QueryFromProto(request)] {
      Serve(cache->Resolve(query), query);
      Unref();
    });
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    if (!ok) {  // the client went away
      FinishOnce(ToGrpcStatus(absl::CancelledError("client cancelled")));
      return;
    }
    WriteNext();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      if (writing_) return;  // the write fails and OnWriteDone finishes
    }
    FinishOnce(ToGrpcStatus(absl::CancelledError("call cancelled")));
  }

  void OnDone() override { Unref(); }

 private:
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
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;  // cancelled while the cache worked
      writing_ = true;
    }
    served_ = *std::move(served);
    HeaderFromServed(served_, message_.mutable_header());
    StartWrite(&message_);  // (no buffer_hint: OnWriteDone would wait for the next write)
  }

  // Called after each write completes: the next chunk, or the end.
  void WriteNext() {
    const std::string& bytes = served_.artifact->bytes;
    if (offset_ >= bytes.size()) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      writing_ = true;
    }
    size_t n = std::min(kChunkBytes, bytes.size() - offset_);
    message_.set_chunk(bytes.data() + offset_, n);
    offset_ += n;
    StartWrite(&message_);
  }

  // gRPC calls are made outside mu_ (a reaction may run inline).
  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called
  bool writing_ ABSL_GUARDED_BY(mu_) = false;   // a write is in flight
  Served served_;                               // set once, before the first write
  v1::ResolveResponse message_;                 // the message in flight (one write at a time)
  size_t offset_ = 0;                           // payload bytes already written
};

}  // namespace

grpc::ServerWriteReactor<v1::ResolveResponse>* NewResolveReactor(
    ArtifactCache* cache, BlockingPool* pool, CallTracker* tracker,
    const v1::ResolveRequest& request) {
  return new ResolveReactor(cache, pool, tracker, request);
}

}  // namespace kcache
