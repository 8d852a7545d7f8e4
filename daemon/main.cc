// kcached: parses flags and hands over to the daemon (daemon/host/daemon.h).
#include <cstdio>

#include "daemon/host/daemon.h"
#include "daemon/host/daemon_flags.h"

int main(int argc, char** argv) {
  absl::StatusOr<kcache::DaemonOptions> options = kcache::ParseDaemonFlags(argc, argv);
  if (!options.ok()) {
    if (options.status().code() == absl::StatusCode::kCancelled) return 0;  // --help
    std::fprintf(stderr, "kcached: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  return kcache::RunDaemon(*std::move(options));
}
