// kcached's log lines: one line per event, whatever the message holds (a newline in a message,
// such as an NVRTC log, is written as "\n"), in UTC. Text for people by default:
//   2026-11-22T05:42:18.473Z info kcached serving on unix:///run/kcache/kcache.sock ...
// and JSON for log collectors with --log-format json, one object per line:
//   {"time":"2026-11-22T05:42:18.473Z","level":"info","msg":"kcached serving on ..."}
#ifndef KCACHE_DAEMON_HOST_LOG_FORMAT_H_
#define KCACHE_DAEMON_HOST_LOG_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kcache {

enum class LogFormat { kText, kJson };

// "text" or "json"; InvalidArgument naming both otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);

// One line, without its newline. `level` is "trace", "debug", "info", "warn", "error" or
// "critical".
std::string FormatLogLine(LogFormat format, absl::Time time, absl::string_view level,
                          absl::string_view message);

// Sends every later spdlog line of the default logger (to stderr) through FormatLogLine, and
// sets its level ("info", ...).
void ConfigureLogging(LogFormat format, absl::string_view level);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_LOG_FORMAT_H_
