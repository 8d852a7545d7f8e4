// BackgroundWriter: one thread of its own runs queued jobs in the order queued, so that a
// request never waits for a write it caused. The one bounded background writer of kcached:
// the write-behind of baked hits into the writable store (daemon/cache/write_behind.h), the
// shared tier's writes of compiled artifacts (daemon/cache/shared_tier.h) and the fleet tier's
// writes of client-made objects (daemon/objects/fleet_object_cache.h).
//
// Bounded: at most `max_jobs` jobs and `max_bytes` of the bytes they stand for wait or run; a
// job past either bound is dropped (Add returns false: the caller counts it). A job added with
// AddAlways (a lease's release, which must run after the writes queued before it, and is
// small) is never dropped and counts toward neither bound.
#ifndef KCACHE_CORE_BACKGROUND_WRITER_H_
#define KCACHE_CORE_BACKGROUND_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kcache {

struct BackgroundWriterBounds {
  size_t max_jobs = std::numeric_limits<size_t>::max();
  uint64_t max_bytes = std::numeric_limits<uint64_t>::max();
};

// What the destructor does with jobs still queued: run them all (nothing accepted is lost on
// a clean shutdown), or drop them (writes to a tier that may not answer; their leases expire).
enum class AtDestruction { kDrain, kAbandon };

// Thread-safe. `run` is called on the writer's thread, one job at a time; it must not call
// back into this writer. Declare the writer after every member `run` uses: it is destroyed
// first, and its destructor joins the thread.
template <typename Job>
class BackgroundWriter {
 public:
  BackgroundWriter(BackgroundWriterBounds bounds, AtDestruction at_destruction,
                   std::function<void(Job&)> run)
      : bounds_(bounds), at_destruction_(at_destruction), run_(std::move(run)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~BackgroundWriter() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Queues `job`, standing for `bytes`, unless that would pass a bound or the writer is being
  // destroyed: then it is dropped and this returns false.
  bool Add(Job job, uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (stopping_ || bounded_jobs_ >= bounds_.max_jobs || bytes > bounds_.max_bytes ||
        bounded_bytes_ > bounds_.max_bytes - bytes) {
      return false;
    }
    ++bounded_jobs_;
    bounded_bytes_ += bytes;
    queue_.push_back(Queued{std::move(job), bytes, true});
    ++added_;
    return true;
  }
  // Queues `job` whatever the bounds.
  void AddAlways(Job job) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(Queued{std::move(job), 0, false});
    ++added_;
  }

  // Blocks until every job queued before the call has run (or the writer is being destroyed
  // and drops what is left).
  void Drain() {
    absl::MutexLock lock(&mu_);
    const uint64_t target = added_;
    auto done = [this, target]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return done_ >= target || (stopping_ && at_destruction_ == AtDestruction::kAbandon);
    };
    mu_.Await(absl::Condition(&done));
  }

  // Bounded jobs waiting or running, and the bytes they stand for.
  size_t jobs() const {
    absl::MutexLock lock(&mu_);
    return bounded_jobs_;
  }
  uint64_t bytes() const {
    absl::MutexLock lock(&mu_);
    return bounded_bytes_;
  }

 private:
  struct Queued {
    Job job;
    uint64_t bytes = 0;
    bool bounded = false;
  };

  void Run() {
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
    for (;;) {
      Queued next;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;  // stopping, and everything queued ran
        if (stopping_ && at_destruction_ == AtDestruction::kAbandon) return;
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      run_(next.job);
      absl::MutexLock lock(&mu_);
      if (next.bounded) {
        --bounded_jobs_;
        bounded_bytes_ -= next.bytes;
      }
      ++done_;
    }
  }

  const BackgroundWriterBounds bounds_;
  const AtDestruction at_destruction_;
  const std::function<void(Job&)> run_;
  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  size_t bounded_jobs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bounded_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t added_ ABSL_GUARDED_BY(mu_) = 0;  // jobs queued so far
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;   // of them, run
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace kcache

#endif  // KCACHE_CORE_BACKGROUND_WRITER_H_
