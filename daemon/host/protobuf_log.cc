#include "daemon/host/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kcache {
namespace {

struct Routed {
  absl::Mutex mutex;
  std::shared_ptr<Statistics> stats ABSL_GUARDED_BY(mutex);
  absl::Time window_start ABSL_GUARDED_BY(mutex) = absl::InfinitePast();
  int lines_in_window ABSL_GUARDED_BY(mutex) = 0;
  uint64_t dropped_since_said ABSL_GUARDED_BY(mutex) = 0;
};

Routed& TheRouted() {
  static Routed* routed = new Routed;
  return *routed;
}

void OnProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                   const std::string& message) {
  Routed& routed = TheRouted();
  uint64_t dropped = 0;
  {
    absl::MutexLock lock(&routed.mutex);
    absl::Time now = absl::Now();
    if (now - routed.window_start >= kProtobufLogWindow) {
      routed.window_start = now;
      routed.lines_in_window = 0;
    }
    if (routed.lines_in_window >= kProtobufLogLines) {
      ++routed.dropped_since_said;
      if (routed.stats != nullptr) routed.stats->Add(Statistic::kProtobufLogLinesDropped);
      return;
    }
    ++routed.lines_in_window;
    dropped = std::exchange(routed.dropped_since_said, 0);
  }
  if (dropped > 0) {
    spdlog::warn("libprotobuf: {} lines like the next were not logged (at most {} a minute)",
                 dropped, kProtobufLogLines);
  }
  if (level == google::protobuf::LOGLEVEL_FATAL) {
    spdlog::critical("libprotobuf {}:{}: {}", filename, line, message);
  } else {
    spdlog::warn("libprotobuf {}:{}: {}", filename, line, message);
  }
}

}  // namespace

void RouteProtobufLog(std::shared_ptr<Statistics> stats) {
  Routed& routed = TheRouted();
  absl::MutexLock lock(&routed.mutex);
  routed.stats = std::move(stats);
  static bool installed = false;  // SetLogHandler is not thread-safe: set once, under the mutex
  if (!installed) google::protobuf::SetLogHandler(&OnProtobufLog);
  installed = true;
}

void StopRoutingProtobufLog(const Statistics* stats) {
  Routed& routed = TheRouted();
  absl::MutexLock lock(&routed.mutex);
  if (routed.stats.get() == stats) routed.stats = nullptr;
}

}  // namespace kcache
