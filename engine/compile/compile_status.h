// CompileStatus: where one compile is — waiting for a compile worker (behind how many), being
// compiled (since when), looked for in the shared tier — and how long it is expected to take;
// written by whoever runs the compile, read by those who wait for it (docs/protocol.md,
// "Progress"). CompileWatch: a waiter's view of the status of the compile it waits for.
#ifndef KCACHE_ENGINE_COMPILE_COMPILE_STATUS_H_
#define KCACHE_ENGINE_COMPILE_COMPILE_STATUS_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kcache {

// Numbered as kcache.v1.CompileStage.
enum class CompileStage : int {
  kUnknown = 0,
  kQueued = 1,     // waiting for a free compile worker
  kCompiling = 2,  // a compile worker (or the in-process compiler) runs it
  kShared = 3,     // looked for in the shared tier, or compiled by another daemon of the fleet
};

// Thread-safe and lock-free: every member is an atomic, so the compile queue may update it
// under its own lock and a progress tick may read it at any time. The fields are set one by
// one: a read may see a new stage with an older count (never a torn value).
class CompileStatus {
 public:
  struct View {
    CompileStage stage = CompileStage::kUnknown;
    uint32_t queued_behind = 0;  // kQueued: compiles running, plus those ahead of it queued
    absl::Duration compiling_for = absl::ZeroDuration();  // kCompiling: since it started
    absl::Duration expected = absl::ZeroDuration();       // how long it should take; 0: unknown
  };

  void Queued(uint32_t behind) {
    queued_behind_.store(behind, std::memory_order_relaxed);
    stage_.store(static_cast<int>(CompileStage::kQueued), std::memory_order_relaxed);
  }
  // Only the count, while it stays queued.
  void QueuedBehind(uint32_t behind) { queued_behind_.store(behind, std::memory_order_relaxed); }
  void Compiling() {
    started_nanos_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
    stage_.store(static_cast<int>(CompileStage::kCompiling), std::memory_order_relaxed);
  }
  void Shared() {
    stage_.store(static_cast<int>(CompileStage::kShared), std::memory_order_relaxed);
  }
  // A real measure only (a compile of the same kernel that was timed); never a guess.
  void Expect(absl::Duration expected) {
    expected_micros_.store(absl::ToInt64Microseconds(expected), std::memory_order_relaxed);
  }

  View Read() const;

 private:
  std::atomic<int> stage_{static_cast<int>(CompileStage::kUnknown)};
  std::atomic<uint32_t> queued_behind_{0};
  std::atomic<int64_t> started_nanos_{0};    // absl::GetCurrentTimeNanos() at Compiling()
  std::atomic<int64_t> expected_micros_{0};  // 0: unknown
};

// What one waiter reads: nothing (kUnknown) until it is pointed at the status of the compile
// it waits for, which several waiters of one compile share. Thread-safe.
class CompileWatch {
 public:
  void Follow(std::shared_ptr<const CompileStatus> status) {
    absl::MutexLock lock(&mu_);
    status_ = std::move(status);
  }
  CompileStatus::View Read() const {
    absl::MutexLock lock(&mu_);
    return status_ != nullptr ? status_->Read() : CompileStatus::View();
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const CompileStatus> status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache

#endif  // KCACHE_ENGINE_COMPILE_COMPILE_STATUS_H_
