#include "daemon/host/log_format.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kcache {
namespace {

// Escapes for a JSON string (RFC 8259): quote, backslash and control characters. Bytes that
// are not valid UTF-8 pass through: messages are ours and ASCII, paths are the only risk.
void AppendJsonEscaped(absl::string_view text, std::string* out) {
  for (char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          *out += c;
        }
    }
  }
}

// Text lines keep everything on one line: newlines and other control characters escaped.
void AppendOneLine(absl::string_view text, std::string* out) {
  for (char c : text) {
    if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      absl::StrAppendFormat(out, "\\x%02x", static_cast<unsigned char>(c));
    } else {
      *out += c;
    }
  }
}

absl::string_view LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "info";
  }
}

class LineFormatter final : public spdlog::formatter {
 public:
  explicit LineFormatter(LogFormat format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line = FormatLogLine(format_, absl::FromChrono(msg.time), LevelName(msg.level),
                                     absl::string_view(msg.payload.data(), msg.payload.size()));
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_);
  }

 private:
  const LogFormat format_;
};

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-format ", name, " is not known: use text or json"));
}

std::string FormatLogLine(LogFormat format, absl::Time time, absl::string_view level,
                          absl::string_view message) {
  std::string stamp = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  std::string out;
  if (format == LogFormat::kJson) {
    absl::StrAppend(&out, "{\"time\":\"", stamp, "\",\"level\":\"", level, "\",\"msg\":\"");
    AppendJsonEscaped(message, &out);
    out += "\"}";
  } else {
    absl::StrAppend(&out, stamp, " ", level, " ");
    AppendOneLine(message, &out);
  }
  return out;
}

void ConfigureLogging(LogFormat format, absl::string_view level) {
  auto logger = std::make_shared<spdlog::logger>("kcached",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::make_unique<LineFormatter>(format));
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::trace);  // every line written as it happens
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace kcache
