// HelperProcesses: the `kcache` commands a stand-in's cache half (libkcache-nvrtc.so,
// libkcache-cuda.so) starts from inside the caller's process, each fed its input on standard
// input (a memfd) and not waited for: the caller's call returns at once. Bounded: at most
// `max_running` run at once, a start past it waits for one to end (up to its `slot_wait`) and
// is given up after that; those that ended are reaped at each start, and the owner waits for
// the rest at exit (Reap(true) from an atexit handler: kExitWait at most). Thread-safe.
#ifndef KCACHE_CLIENT_LAUNCH_HELPER_PROCESSES_H_
#define KCACHE_CLIENT_LAUNCH_HELPER_PROCESSES_H_

#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kcache::launch {

// The `kcache` beside the shared library that holds `anchor` (an address in it): the build
// tree's client/cli/<dir>/../kcache, or an installed prefix's lib/kcache/<dir>/../../../bin/kcache;
// "" when there is none.
std::string FindKcacheBeside(const void* anchor);

class HelperProcesses {
 public:
  // How long the process, at exit, waits for helpers still running.
  static constexpr absl::Duration kExitWait = absl::Seconds(30);

  // `kcache` is the binary run (FindKcacheBeside); "" starts nothing.
  HelperProcesses(std::string kcache, size_t max_running);
  HelperProcesses(const HelperProcesses&) = delete;
  HelperProcesses& operator=(const HelperProcesses&) = delete;

  const std::string& kcache() const { return kcache_; }

  // Starts `kcache args...` with `input` as its standard input. FailedPrecondition without a
  // kcache; ResourceExhausted when `max_running` still run after `slot_wait`; Internal when the
  // memfd or the spawn fails (saying why).
  absl::Status Start(const std::vector<std::string>& args, absl::string_view input,
                     absl::Duration slot_wait);

  // Runs `kcache args...` with `input` as its standard input and waits for it: what it wrote to
  // standard output (its standard error is the caller's). Counts no slot: the caller waits.
  // DeadlineExceeded when it has not ended within `timeout`, ResourceExhausted when it writes
  // more than `max_output` bytes (either way it is killed and reaped); Unknown naming its exit
  // status when it fails; FailedPrecondition without a kcache; Internal when the spawn fails.
  absl::StatusOr<std::string> Ask(const std::vector<std::string>& args, absl::string_view input,
                                  absl::Duration timeout, size_t max_output);

  // Reaps the helpers that have ended; with `wait`, waits for the rest (kExitWait at most).
  void Reap(bool wait);

 private:
  const std::string kcache_;
  const size_t max_running_;
  std::mutex mutex_;
  std::vector<pid_t> running_;  // started, not reaped yet
};

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_HELPER_PROCESSES_H_
