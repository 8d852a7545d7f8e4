// What the processes of one observed compile did, read back from the log they wrote
// (observe_log.h; the preloaded library observe_preload.c writes it): the raw facts, without
// judging them. engine/keys/observed_manifest.h decides what of them is keyed.
#ifndef KCACHE_ENGINE_OBSERVE_OBSERVED_READS_H_
#define KCACHE_ENGINE_OBSERVE_OBSERVED_READS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache::observe {

// One path's fact, with the process that saw it (its pid).
struct PathFact {
  char kind = 0;  // KCACHE_OBSERVE_READ, _EXISTS, _LEXISTS, _ABSENT, _FAILED, _LISTED,
                  // _LOADED, _LINK, _REALPATH
  pid_t pid = 0;
  std::string path;
  std::string value;  // _LINK: the target; _REALPATH: the result; _FAILED: the errno
};

struct EnvRead {
  pid_t pid = 0;
  std::string name;
  std::optional<std::string> value;  // nullopt: it was unset
};

struct ObservedReads {
  // Each process that recorded its start: pid -> its executable's real path.
  absl::flat_hash_map<pid_t, std::string> processes;
  // Every path fact, in the order written (several processes' interleaved).
  std::vector<PathFact> facts;
  // Paths written, created, renamed or removed by any process: its outputs and temporaries.
  absl::flat_hash_set<std::string> written;
  std::vector<EnvRead> env;
  std::vector<pid_t> clock_readers;                               // processes that called time()
  std::vector<std::pair<std::string, std::string>> unobservable;  // (path, why)
  // Libraries asked for by name that could not be loaded (NVRTC's records only:
  // client/nvrtc/nvrtc_reads.h).
  std::vector<std::string> unloadable;
  // Programs started with, or variables read holding, an option that lets the machine pick
  // the code: (program or $NAME, the argument or value).
  std::vector<std::pair<std::string, std::string>> native_targets;
  // Programs started that never recorded their start, nor a failure to start: (pid, path).
  std::vector<std::pair<pid_t, std::string>> unstarted;
  size_t damaged_lines = 0;  // lines that did not parse (a record cut short)
};

// Parses a log's text. Never fails: a line it cannot read is counted in damaged_lines.
ObservedReads ParseObservation(absl::string_view log);

// Reads and parses the log at `path`. NotFound when it is missing.
absl::StatusOr<ObservedReads> ReadObservation(const std::string& path);

}  // namespace kcache::observe

#endif  // KCACHE_ENGINE_OBSERVE_OBSERVED_READS_H_
