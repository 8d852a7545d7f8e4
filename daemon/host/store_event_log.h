// StoreEventLog: kcached's log of what its stores report on their own (StoreEvent: a corrupt
// entry, an eviction, a full disk, a store replaced), rate-limited per kind so a damaged or
// full store cannot flood the log: at most kLinesPerMinute lines of each kind a minute, then
// one line saying how many were left out.
#ifndef KCACHE_DAEMON_HOST_STORE_EVENT_LOG_H_
#define KCACHE_DAEMON_HOST_STORE_EVENT_LOG_H_

#include <array>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/store/store.h"

namespace kcache {

// Thread-safe.
class StoreEventLog {
 public:
  static constexpr int kLinesPerMinute = 10;

  // Logs `event` through spdlog (warn; evictions at info) unless its kind is over its rate.
  void Log(const StoreEvent& event);
  // A callback for StoreOptions::on_event; `this` must outlive the stores given it.
  std::function<void(const StoreEvent&)> Callback() {
    return [this](const StoreEvent& event) { Log(event); };
  }

 private:
  struct Window {
    absl::Time start = absl::InfinitePast();
    int logged = 0;
    uint64_t suppressed = 0;
  };
  absl::Mutex mu_;
  std::array<Window, 4> windows_ ABSL_GUARDED_BY(mu_);  // by StoreEvent::Kind
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_STORE_EVENT_LOG_H_
