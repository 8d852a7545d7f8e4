// BlockingPool: threads for work that may block (a Resolve that waits for a compile, a Warm,
// a store scan), so that gRPC's callback threads never wait on a compile. Elastic: a task
// starts at once on an idle thread or a new one, up to max_threads; beyond that it queues.
// Idle threads exit after a while. Many requests waiting on one single-flight compile hold
// one thread each, so the cap is generous; requests for cached artifacts are not stuck behind
// them until it is reached.
#ifndef KCACHE_DAEMON_SERVICE_BLOCKING_POOL_H_
#define KCACHE_DAEMON_SERVICE_BLOCKING_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kcache {

class BlockingPool {
 public:
  explicit BlockingPool(size_t max_threads, absl::Duration idle_exit = absl::Seconds(30));
  // Waits for every task (queued or running) to finish.
  ~BlockingPool();
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  // Thread-safe. Runs `task` on a pool thread.
  void Submit(std::function<void()> task);

  // Waits until no task is queued or running, or until `deadline`. True when drained.
  bool Drain(absl::Time deadline);

  // Tasks queued or running now.
  size_t pending() const;

 private:
  void WorkerLoop(std::list<std::thread>::iterator self);
  void JoinFinished();

  const size_t max_threads_;
  const absl::Duration idle_exit_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mu_);     // live workers
  std::vector<std::thread> finished_ ABSL_GUARDED_BY(mu_);  // exited, not joined yet
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_BLOCKING_POOL_H_
