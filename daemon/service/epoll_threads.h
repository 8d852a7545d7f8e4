// EpollThreads: serving threads that share one epoll set, and the eventfd that wakes every one
// of them to stop: ConnectionServer's (connection_server.h), under the fast path and the Redis
// door. Their loops take events from fd() and return on kWakeId.
#ifndef KCACHE_DAEMON_SERVICE_EPOLL_THREADS_H_
#define KCACHE_DAEMON_SERVICE_EPOLL_THREADS_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace kcache {

// Open, Start and Stop are called by one thread (the owner's); fd() from any thread.
class EpollThreads {
 public:
  // The wake-up event's data.u64. Level-triggered: once Stop writes it, every thread sees it.
  static constexpr uint64_t kWakeId = 1;

  EpollThreads() = default;
  EpollThreads(const EpollThreads&) = delete;
  EpollThreads& operator=(const EpollThreads&) = delete;
  // Stops the threads, then closes the epoll set and the eventfd.
  ~EpollThreads();

  // Creates the epoll set and the eventfd, registered under kWakeId. FailedPrecondition with
  // the system's reason when either cannot be made.
  absl::Status Open();
  // The epoll set (-1 before Open).
  int fd() const { return epoll_; }
  // Starts `count` threads (at least one) running `loop`.
  void Start(int count, const std::function<void()>& loop);
  // Wakes every thread and joins them. Idempotent; the epoll set stays open until destruction.
  void Stop();

 private:
  int epoll_ = -1;
  int wake_ = -1;
  std::vector<std::thread> threads_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_EPOLL_THREADS_H_
