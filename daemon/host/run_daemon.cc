// RunDaemon: kcached's main loop (signals, start, shutdown, exit code).
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "daemon/host/daemon.h"
#include "daemon/host/sd_notify.h"

namespace kcache {
namespace {

int signal_pipe[2] = {-1, -1};

void OnSignal(int signo) {
  int saved = errno;
  char byte = static_cast<char>(signo);
  [[maybe_unused]] ssize_t n = write(signal_pipe[1], &byte, 1);
  errno = saved;
}

// Signals are turned into bytes on a pipe (a handler may do little else), read by the main
// thread. Handlers rather than a blocked mask, so that the compile workers the daemon spawns
// start with the default signal dispositions.
bool InstallSignalHandlers() {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signo : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) {
    if (sigaction(signo, &action, nullptr) != 0) return false;
  }
  signal(SIGPIPE, SIG_IGN);  // a client or worker gone mid-write is an error value, not a death
  return true;
}

const char* SignalName(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    default:
      return "a signal";
  }
}

// Waits for SIGTERM or SIGINT and returns it. SIGHUP, SIGUSR1 and SIGUSR2 (which would
// otherwise kill the daemon at once and leave its socket file) are logged and ignored:
// kcached has no configuration to reload (docs/kcached.md, "Signals and shutdown").
int WaitForStopSignal() {
  while (true) {
    char byte = 0;
    ssize_t n = read(signal_pipe[0], &byte, 1);
    if (n != 1) {
      if (n < 0 && errno == EINTR) continue;
      return 0;
    }
    int signo = static_cast<unsigned char>(byte);
    if (signo == SIGTERM || signo == SIGINT) return signo;
    spdlog::info("received {}: ignored (kcached reloads nothing; SIGTERM stops it)",
                 SignalName(signo));
  }
}

// Tells systemd (Type=notify); a failure is logged, never fatal: the daemon serves anyway.
void Notify(absl::string_view state) {
  if (absl::Status s = NotifySystemd(state); !s.ok()) {
    spdlog::warn("{}", std::string(s.message()));
  }
}

}  // namespace

int RunDaemon(DaemonOptions options) {
  if (!InstallSignalHandlers()) {
    spdlog::error("cannot install signal handlers");
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(std::move(options));
  if (!daemon.ok()) {
    spdlog::error("kcached cannot start: {}", std::string(daemon.status().message()));
    return 1;
  }
  Notify("READY=1\nSTATUS=serving");
  int signo = WaitForStopSignal();
  spdlog::info("received {}: stopping", SignalName(signo));
  Notify("STOPPING=1\nSTATUS=finishing in-flight requests");
  // A second signal while shutting down means "now".
  std::thread([] {
    WaitForStopSignal();
    spdlog::warn("second signal: exiting without waiting for in-flight requests");
    spdlog::shutdown();
    std::_Exit(1);
  }).detach();
  bool clean = (*daemon)->Shutdown();
  // The stores are closed (when clean) and every write is durable; the gRPC servers are
  // stopped but deliberately not destroyed: their destructor tears gRPC down globally and can
  // wait on connections that idle clients never poll. Leave them to the exit.
  if (clean) {
    spdlog::info("kcached stopped");
  } else {
    spdlog::warn("kcached stopped with background work still running");
  }
  spdlog::shutdown();
  std::_Exit(0);
}

}  // namespace kcache
