// kcached's command line (docs/kcached.md) -> DaemonOptions.
#ifndef KCACHE_DAEMON_HOST_DAEMON_FLAGS_H_
#define KCACHE_DAEMON_HOST_DAEMON_FLAGS_H_

#include "absl/status/statusor.h"
#include "daemon/host/daemon.h"

namespace kcache {

// Parses argv. `--help` / `--version` print and return a status whose code is kCancelled
// (exit 0); a bad flag returns InvalidArgument with the usage problem (exit 2).
absl::StatusOr<DaemonOptions> ParseDaemonFlags(int argc, char** argv);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_DAEMON_FLAGS_H_
