// libprotobuf's own log lines in kcached. The library writes one ERROR line to stderr for each
// client message whose string field is not UTF-8, which a client could send by the thousand to
// flood kcached's log; routed here they go to kcached's log (spdlog, as warnings) at most
// kProtobufLogLines per kProtobufLogWindow, and every line past that is counted
// (log.protobuf_lines_dropped, kcache_log_lines_dropped_total{source="protobuf"}) and said
// once, with how many, when the window opens again. The message that drew the line is refused
// by whoever parsed it, as before.
#ifndef KCACHE_DAEMON_HOST_PROTOBUF_LOG_H_
#define KCACHE_DAEMON_HOST_PROTOBUF_LOG_H_

#include <memory>

#include "absl/time/time.h"
#include "daemon/cache/statistics.h"

namespace kcache {

inline constexpr int kProtobufLogLines = 5;
inline constexpr absl::Duration kProtobufLogWindow = absl::Minutes(1);

// Routes libprotobuf's log lines (process-wide) through the bound above, counting into `stats`
// (which this keeps alive until the next call or StopRoutingProtobufLog). Thread-safe.
void RouteProtobufLog(std::shared_ptr<Statistics> stats);

// Stops counting into `stats` if it is the one routed to (a daemon going away); lines are still
// bounded, uncounted.
void StopRoutingProtobufLog(const Statistics* stats);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_PROTOBUF_LOG_H_
