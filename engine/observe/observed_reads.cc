#include "engine/observe/observed_reads.h"

#include <charconv>

#include "absl/strings/str_split.h"
#include "core/file_io.h"
#include "engine/observe/observe_log.h"

namespace kcache::observe {
namespace {

std::string Unescape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      char next = text[++i];
      out.push_back(next == 'n' ? '\n' : (next == 't' ? '\t' : next));
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

bool ParsePid(absl::string_view text, pid_t* pid) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return false;
  *pid = static_cast<pid_t>(value);
  return true;
}

// The payload's two fields (split at the first unescaped tab).
std::pair<std::string, std::string> Fields(absl::string_view payload) {
  size_t tab = payload.find('\t');
  if (tab == absl::string_view::npos) return {Unescape(payload), ""};
  return {Unescape(payload.substr(0, tab)), Unescape(payload.substr(tab + 1))};
}

}  // namespace

namespace {

// One pass over a log: its records into ObservedReads, and what shows that each program a
// process started ran observed.
class LogReader {
 public:
  // Line `number` (from 1) of the log.
  void Line(size_t number, absl::string_view line) {
    // "<kind> <pid> <payload>"
    if (line.size() < 4 || line[1] != ' ') {
      ++reads_.damaged_lines;
      return;
    }
    size_t space = line.find(' ', 2);
    pid_t pid = 0;
    if (space == absl::string_view::npos || !ParsePid(line.substr(2, space - 2), &pid)) {
      ++reads_.damaged_lines;
      return;
    }
    Record(line[0], pid, line.substr(space + 1), number);
  }

  ObservedReads Finish() {
    NoteUnstarted();
    return std::move(reads_);
  }

 private:
  // A program started, and what can show it ran observed: a start recorded under its pid (by
  // the new program), or, for a process replacing itself, a failure its exec recorded after.
  struct Exec {
    pid_t writer, runner;
    std::string path;
    size_t line;
  };

  void Record(char kind, pid_t pid, absl::string_view payload, size_t number) {
    switch (kind) {
      case KCACHE_OBSERVE_START: {
        auto [parent, exe] = Fields(payload);
        reads_.processes[pid] = exe;
        starts_[pid].push_back(number);
        break;
      }
      case KCACHE_OBSERVE_EXEC: {
        auto [runner, path] = Fields(payload);
        pid_t child = 0;
        if (!ParsePid(runner, &child)) {
          ++reads_.damaged_lines;
          break;
        }
        execs_.push_back(Exec{pid, child, std::move(path), number});
        break;
      }
      case KCACHE_OBSERVE_WRITE:
        reads_.written.insert(Unescape(payload));
        break;
      case KCACHE_OBSERVE_ENV: {
        std::string text = Unescape(payload);
        size_t equals = text.find('=');
        if (equals == std::string::npos) {
          ++reads_.damaged_lines;
          break;
        }
        reads_.env.push_back(EnvRead{pid, text.substr(0, equals), text.substr(equals + 1)});
        break;
      }
      case KCACHE_OBSERVE_ENV_UNSET:
        reads_.env.push_back(EnvRead{pid, Unescape(payload), std::nullopt});
        break;
      case KCACHE_OBSERVE_CLOCK:
        reads_.clock_readers.push_back(pid);
        break;
      case KCACHE_OBSERVE_UNOBSERVABLE:
        reads_.unobservable.push_back(Fields(payload));
        break;
      case KCACHE_OBSERVE_UNLOADABLE:
        reads_.unloadable.push_back(Unescape(payload));
        break;
      case KCACHE_OBSERVE_NATIVE:
        reads_.native_targets.push_back(Fields(payload));
        break;
      case KCACHE_OBSERVE_FAILED: {
        auto [error, path] = Fields(payload);
        reads_.facts.push_back(PathFact{kind, pid, std::move(path), std::move(error)});
        failures_[pid].push_back(number);
        break;
      }
      case KCACHE_OBSERVE_ABSENT:
        failures_[pid].push_back(number);
        reads_.facts.push_back(PathFact{kind, pid, Unescape(payload), ""});
        break;
      case KCACHE_OBSERVE_READ:
      case KCACHE_OBSERVE_EXISTS:
      case KCACHE_OBSERVE_LEXISTS:
      case KCACHE_OBSERVE_LISTED:
      case KCACHE_OBSERVE_LOADED:
        reads_.facts.push_back(PathFact{kind, pid, Unescape(payload), ""});
        break;
      case KCACHE_OBSERVE_LINK:
      case KCACHE_OBSERVE_REALPATH: {
        auto [path, value] = Fields(payload);
        reads_.facts.push_back(PathFact{kind, pid, std::move(path), std::move(value)});
        break;
      }
      default:
        ++reads_.damaged_lines;
    }
  }

  // A spawned program (another pid) must have recorded its start, whenever; a process that
  // replaced itself, a start or a failure after the exec record.
  void NoteUnstarted() {
    auto after = [](const std::vector<size_t>* lines, size_t from) {
      if (lines == nullptr) return false;
      for (size_t line : *lines) {
        if (line > from) return true;
      }
      return false;
    };
    for (const Exec& exec : execs_) {
      auto started = starts_.find(exec.runner);
      auto failed = failures_.find(exec.runner);
      const std::vector<size_t>* start_lines =
          started == starts_.end() ? nullptr : &started->second;
      const std::vector<size_t>* failure_lines =
          failed == failures_.end() ? nullptr : &failed->second;
      bool ran = exec.runner != exec.writer
                     ? start_lines != nullptr
                     : after(start_lines, exec.line) || after(failure_lines, exec.line);
      if (!ran) reads_.unstarted.emplace_back(exec.runner, exec.path);
    }
  }

  ObservedReads reads_;
  std::vector<Exec> execs_;
  absl::flat_hash_map<pid_t, std::vector<size_t>> starts_, failures_;  // pid -> line numbers
};

}  // namespace

ObservedReads ParseObservation(absl::string_view log) {
  LogReader reader;
  size_t number = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    reader.Line(++number, line);
  }
  return reader.Finish();
}

absl::StatusOr<ObservedReads> ReadObservation(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ParseObservation(*text);
}

}  // namespace kcache::observe
