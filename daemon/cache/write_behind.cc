#include "daemon/cache/write_behind.h"

#include <utility>

namespace kcache {

WriteBehind::WriteBehind(uint64_t max_bytes, std::function<void(const Artifact&)> write,
                         std::function<void()> on_dropped)
    : write_(std::move(write)),
      on_dropped_(std::move(on_dropped)),
      writer_(BackgroundWriterBounds{.max_bytes = max_bytes}, AtDestruction::kDrain,
              [this](std::shared_ptr<const Artifact>& artifact) {
                write_(*artifact);
                absl::MutexLock lock(&mu_);
                queued_keys_.erase(KeyWithChecksum(artifact->meta));
              }) {}

WriteBehind::~WriteBehind() = default;

bool WriteBehind::Add(std::shared_ptr<const Artifact> artifact) {
  std::string key = KeyWithChecksum(artifact->meta);
  {
    absl::MutexLock lock(&mu_);
    if (!queued_keys_.insert(key).second) return true;  // already waiting
  }
  uint64_t size = artifact->bytes.size();
  if (writer_.Add(std::move(artifact), size)) return true;
  {
    absl::MutexLock lock(&mu_);
    queued_keys_.erase(key);
  }
  if (on_dropped_) on_dropped_();
  return false;
}

void WriteBehind::Drain() { writer_.Drain(); }

}  // namespace kcache
