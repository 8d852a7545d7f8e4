// Daemon start-up for bench/startup: a large synthetic store written with the engine's store
// API, and kcached timed from exec to ready (its systemd READY=1, sd_notify(3)).
#ifndef KCACHE_BENCH_DAEMON_START_H_
#define KCACHE_BENCH_DAEMON_START_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tests/testutil/daemon_process.h"

namespace kcache::bench {

// Adds `artifacts` synthetic artifacts of `bytes / artifacts` pseudo-random bytes each to the
// store at `path` (created if missing; what it holds stays): a kernel record per 4 artifacts
// and, per kernel, cubins for sm_75, sm_86 and sm_90 and PTX for compute_75, as `kcache warm`
// stores them. None of them serves an 8.9 device better than the real kernels' own cubins.
absl::Status AddSyntheticArtifacts(const std::string& path, uint64_t artifacts, uint64_t bytes);

// Spawns `daemon` with $NOTIFY_SOCKET pointing at a socket of this process and returns the
// microseconds from the spawn to its READY=1 (the daemon then serves: docs/kcached.md), or an
// error (with the daemon's log) when it exits or is not ready within 60 s.
absl::StatusOr<double> StartTimed(testing::DaemonProcess& daemon);

}  // namespace kcache::bench

#endif  // KCACHE_BENCH_DAEMON_START_H_
