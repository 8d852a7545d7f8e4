// StreamWriter: the one queued writer of kcached's server streams (Resolve, ResolveMany, Warm).
#ifndef KCACHE_DAEMON_SERVICE_STREAM_WRITER_H_
#define KCACHE_DAEMON_SERVICE_STREAM_WRITER_H_

#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/service/call_tracker.h"
#include "daemon/service/grpc_status.h"

namespace kcache {

// A grpc::ServerWriteReactor<Message> that writes a queue of messages, one write in flight at
// a time, and finishes the call exactly once.
//
// Messages go out in the order they are queued; OnWriteDone starts the next. The call finishes
// with the status given with the last messages (Queue's `end`) once they are all out; or, when
// it breaks (cancelled, shutdown's grace ran out, or a write failed because the client went
// away), with the first break's status as soon as no write is in flight: a break drops what is
// queued and sets gave_up(). While nothing is queued and no write is out, the subclass may
// offer one message of lower priority through NextIdle (progress): such a message therefore
// never goes out between the messages of one Queue call.
//
// Lifetime: a TrackedCall whose gRPC reference is dropped in OnDone; the subclass adds one
// reference per background task that may still call it.
//
// Bound: ReserveQueued takes part of the CallTracker's bound of bytes queued for slow readers
// for the whole call; the writer gives it back when it is destroyed.
//
// Thread-safe: Queue (under mu_), Kick and Send may be called from any thread. gRPC calls are
// made outside mu_ (a reaction may run inline). Subclasses may guard their own state with
// mu_; NextIdle is called with it held.
template <typename Message>
class StreamWriter : public grpc::ServerWriteReactor<Message>, protected TrackedCall {
 public:
  void OnWriteDone(bool ok) final {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) BreakLocked(absl::CancelledError("client cancelled"));
    }
    Kick();
  }

  void OnCancel() final { CancelNow(absl::CancelledError("call cancelled")); }

  // Breaks the call with `status` (TrackedCall: shutdown's grace ran out, or OnCancel).
  void CancelNow(const absl::Status& status) final {
    {
      absl::MutexLock lock(&mu_);
      BreakLocked(status);
    }
    Kick();
  }

  void OnDone() final { Unref(); }

 protected:
  explicit StreamWriter(CallTracker* tracker) : TrackedCall(tracker) {}
  ~StreamWriter() override {
    if (reserved_ > 0) tracker_->ReleaseQueued(reserved_);
  }

  // Queues `messages`, in order, and, when given, the status to finish with once they are out
  // (nothing may be queued after it). False, queueing nothing, once the call ended or broke.
  // Call Kick after releasing mu_.
  bool Queue(std::vector<Message> messages, std::optional<grpc::Status> end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (Over()) return false;
    for (Message& message : messages) queue_.push_back(std::move(message));
    end_ = std::move(end);
    return true;
  }

  // Queue, then Kick.
  bool Send(std::vector<Message> messages, std::optional<grpc::Status> end = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_) {
    bool queued;
    {
      absl::MutexLock lock(&mu_);
      queued = Queue(std::move(messages), std::move(end));
    }
    Kick();
    return queued;
  }

  // Finishes with `status` once what is queued is out: an answer without messages.
  void End(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) { Send({}, status); }

  // Starts the next write (queued, else NextIdle's), or the finish once it is due. Does
  // nothing while a write is in flight: its OnWriteDone calls Kick again.
  void Kick() ABSL_LOCKS_EXCLUDED(mu_) {
    bool write = false;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!broken_ && !queue_.empty()) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        writing_ = write = true;
      } else if (broken_ || end_) {
        finished_ = true;
        finish = end_;
      } else if (NextIdle(&current_)) {
        writing_ = write = true;
      }
    }
    if (write) this->StartWrite(&current_);  // (no buffer_hint: OnWriteDone would wait)
    if (finish) this->Finish(*finish);
  }

  // True once the call will send nothing more that is queued now: its end is known, or it
  // broke.
  bool Over() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return broken_ || end_.has_value(); }

  // Reserves `bytes` of the tracker's bound of bytes queued for slow readers until the call is
  // destroyed; false (nothing reserved) when the bound would be passed. Call at most once.
  bool ReserveQueued(uint64_t bytes) {
    if (bytes == 0 || !tracker_->ReserveQueued(bytes)) return bytes == 0;
    reserved_ = bytes;
    return true;
  }

  // A message of lower priority to write now that nothing is queued and no write is out
  // (progress); false for none. Called with mu_ held, never after the call ended or broke.
  virtual bool NextIdle(Message* /*message*/) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return false; }

  // Set when the call breaks: read by work for it (ResolveQuery::still_wanted), which may
  // outlive the call.
  const std::shared_ptr<std::atomic<bool>>& gave_up() const { return gave_up_; }

  absl::Mutex mu_;

 private:
  void BreakLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    gave_up_->store(true);
    if (broken_ || finished_) return;
    broken_ = true;
    queue_.clear();
    end_ = ToGrpcStatus(status);
  }

  const std::shared_ptr<std::atomic<bool>> gave_up_ = std::make_shared<std::atomic<bool>>(false);
  uint64_t reserved_ = 0;  // of the tracker's queued-bytes bound
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  Message current_;  // the message in flight; changed only when !writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_STREAM_WRITER_H_
