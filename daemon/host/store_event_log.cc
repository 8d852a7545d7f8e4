#include "daemon/host/store_event_log.h"

#include <spdlog/spdlog.h>

#include <string>

namespace kcache {
namespace {

const char* KindName(StoreEvent::Kind kind) {
  switch (kind) {
    case StoreEvent::Kind::kCorrupt:
      return "corrupt store entries";
    case StoreEvent::Kind::kEvicted:
      return "store evictions";
    case StoreEvent::Kind::kDiskFull:
      return "full-disk refusals";
    case StoreEvent::Kind::kReplaced:
      return "replaced stores";
  }
  return "store events";
}

}  // namespace

void StoreEventLog::Log(const StoreEvent& event) {
  uint64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu_);
    Window& window = windows_[static_cast<size_t>(event.kind)];
    absl::Time now = absl::Now();
    if (now - window.start >= absl::Minutes(1)) {
      suppressed = window.suppressed;
      window = Window{now, 0, 0};
    }
    if (window.logged >= kLinesPerMinute) {
      ++window.suppressed;
      return;
    }
    ++window.logged;
  }
  if (suppressed > 0) {
    spdlog::warn("{} more {} in the last minute were not logged (see kcache_store_* metrics)",
                 suppressed, KindName(event.kind));
  }
  if (event.kind == StoreEvent::Kind::kEvicted) {
    spdlog::info("{}", event.text);
  } else {
    spdlog::warn("{}", event.text);
  }
}

}  // namespace kcache
