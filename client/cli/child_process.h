// Running a command as kcache's child, for `kcache run` when it has work to do once the command
// is done (capturing cache directories: run_cache_dirs.h). The child is the command exactly as
// exec would have run it (same arguments, environment, descriptors, process group); kcache
// waits, and hands on the signals sent to it.
#ifndef KCACHE_CLIENT_CLI_CHILD_PROCESS_H_
#define KCACHE_CLIENT_CLI_CHILD_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kcache::cli {

// Starts `argv` (PATH searched, as execvp) with this process's environment and waits for it.
// While it runs, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 that another process
// sends kcache (kill, a pod's stop) are sent on to the child; those the terminal sends to the
// whole process group reach the child by themselves and are not sent twice. The child's wait
// status; NotFound or PermissionDenied (naming the command) when it cannot be started.
absl::StatusOr<int> RunChild(const std::vector<std::string>& argv);

// The exit code that says what `status` (a wait status) says: the child's exit code, or, when a
// signal ended it, the same signal raised here with its default action (so that kcache's
// parent sees what it would have seen of the command); 128 + the signal where that returns.
int ExitLike(int status);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_CHILD_PROCESS_H_
