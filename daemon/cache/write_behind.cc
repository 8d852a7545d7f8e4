#include "daemon/cache/write_behind.h"

#include <utility>

namespace kcache {
WriteBehind::WriteBehind(uint64_t max_bytes, std::function<void(const Artifact&)> write,
                         std::function<void()> on_dropped)
    : max_bytes_(max_bytes), write_(std::move(write)), on_dropped_(std::move(on_dropped)) {
  writer_ = std::thread([this] { Run(); });
}

WriteBehind::~WriteBehind() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
}

bool WriteBehind::Add(std::shared_ptr<const Artifact> artifact) {
  {
    absl::MutexLock lock(&mu_);
    std::string key = KeyWithChecksum(artifact->meta);
    if (queued_keys_.contains(key)) return true;
    uint64_t size = artifact->bytes.size();
    if (!stopping_ && queued_bytes_ + size <= max_bytes_) {
      queued_keys_.insert(std::move(key));
      queued_bytes_ += size;
      queue_.push_back(std::move(artifact));
      ++added_;
      return true;
    }
  }
  if (on_dropped_) on_dropped_();
  return false;
}

void WriteBehind::Drain() {
  absl::MutexLock lock(&mu_);
  uint64_t target = added_;
  auto done = [this, target]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return written_ >= target; };
  mu_.Await(absl::Condition(&done));
}

void WriteBehind::Run() {
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
  while (true) {
    std::shared_ptr<const Artifact> next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and everything accepted was written
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    write_(*next);
    absl::MutexLock lock(&mu_);
    queued_keys_.erase(KeyWithChecksum(next->meta));
    queued_bytes_ -= next->bytes.size();
    ++written_;
  }
}

}  // namespace kcache
