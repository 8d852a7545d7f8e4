#include "daemon/cache/background_compiles.h"

#include <utility>

namespace kcache {

BackgroundCompiles::BackgroundCompiles(size_t bound, CompileFn compile, Statistics* stats)
    : bound_(bound), compile_(std::move(compile)), stats_(stats) {
  thread_ = std::thread([this] { Run(); });
}

BackgroundCompiles::~BackgroundCompiles() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool BackgroundCompiles::Add(CompileJob job, size_t toolkit) {
  job.demand = CompileDemand{"(background)", nullptr, nullptr};  // for later callers: always wanted
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= bound_) {
    stats_->Add(Statistic::kBackgroundCompilesDropped);
    return false;
  }
  stats_->Add(Statistic::kBackgroundCompilesQueued);
  queue_.push_back(Queued{std::move(job), toolkit});
  return true;
}

void BackgroundCompiles::Run() {
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
  while (true) {
    Queued next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;  // queued compiles are dropped: nobody waits for them
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    compile_(next.job, next.toolkit);
  }
}

}  // namespace kcache
