#include "daemon/cache/background_compiles.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache {

BackgroundCompiles::BackgroundCompiles(size_t bound, CompileFn compile, Statistics* stats,
                                       Counts counts, size_t per_client)
    : bound_(bound),
      per_client_(per_client),
      compile_(std::move(compile)),
      stats_(stats),
      counts_(counts) {
  thread_ = std::thread([this] { Run(); });
}

BackgroundCompiles::~BackgroundCompiles() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

BackgroundCompiles::Added BackgroundCompiles::Add(CompileJob job, size_t toolkit) {
  std::string client = std::move(job.demand.client);
  job.demand = CompileDemand{"(background)", nullptr, nullptr};  // for later callers: always wanted
  std::string key = absl::StrCat(job.id.Bytes(), job.target.ToString());
  absl::MutexLock lock(&mu_);
  if (keys_.contains(key)) return Added::kAlreadyQueued;
  if (queue_.size() >= bound_) {
    stats_->Add(counts_.dropped);
    return Added::kDropped;
  }
  auto queued = per_client_queued_.find(client);
  if (per_client_ > 0 && queued != per_client_queued_.end() && queued->second >= per_client_) {
    stats_->Add(counts_.dropped);
    return Added::kClientBound;
  }
  stats_->Add(counts_.queued);
  keys_.insert(key);
  ++per_client_queued_[client];
  queue_.push_back(Queued{std::move(job), toolkit, std::move(client), std::move(key)});
  return Added::kQueued;
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
      keys_.erase(next.key);
      if (--per_client_queued_[next.client] == 0) per_client_queued_.erase(next.client);
    }
    compile_(next.job, next.toolkit);
  }
}

}  // namespace kcache
