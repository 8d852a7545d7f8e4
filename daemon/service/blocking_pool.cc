#include "daemon/service/blocking_pool.h"

#include <utility>

namespace kcache {

BlockingPool::BlockingPool(size_t max_threads, absl::Duration idle_exit)
    : max_threads_(max_threads == 0 ? 1 : max_threads), idle_exit_(idle_exit) {}

BlockingPool::~BlockingPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    auto all_exited = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_.empty(); };
    mu_.Await(absl::Condition(&all_exited));
  }
  JoinFinished();
}

void BlockingPool::Submit(std::function<void()> task) {
  std::vector<std::thread> to_join;
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
    if (idle_ < queue_.size() && threads_.size() < max_threads_) {
      auto self = threads_.emplace(threads_.end());
      *self = std::thread([this, self] { WorkerLoop(self); });  // it waits for mu_ first
    }
    to_join.swap(finished_);
  }
  for (std::thread& t : to_join) t.join();
}

void BlockingPool::WorkerLoop(std::list<std::thread>::iterator self) {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    auto has_work_or_stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || stopping_;
    };
    bool woke = mu_.AwaitWithTimeout(absl::Condition(&has_work_or_stop), idle_exit_);
    --idle_;
    if (queue_.empty()) {
      if (stopping_ || !woke) break;
      continue;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    mu_.Unlock();
    task();
    task = nullptr;  // destroy captures outside the lock
    mu_.Lock();
    --running_;
  }
  // Hand this thread's handle to whoever joins next (Submit or the destructor).
  finished_.push_back(std::move(*self));
  threads_.erase(self);
}

void BlockingPool::JoinFinished() {
  std::vector<std::thread> to_join;
  {
    absl::MutexLock lock(&mu_);
    to_join.swap(finished_);
  }
  for (std::thread& t : to_join) t.join();
}

bool BlockingPool::Drain(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto drained = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && running_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&drained), deadline);
}

size_t BlockingPool::pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + running_;
}

}  // namespace kcache
