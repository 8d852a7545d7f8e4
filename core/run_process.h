// Running a program (the real compiler, a tool asked its version): with its output captured (a
// miss, to store it) or in place of this process (uncached: exec, nothing in between).
#ifndef KCACHE_ENGINE_LAUNCHER_RUN_PROCESS_H_
#define KCACHE_ENGINE_LAUNCHER_RUN_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kcache {

struct ProcessResult {
  int exit_code = 0;  // 128 + signal when it was killed
  std::string stdout_text, stderr_text;
};

// How RunCaptured runs its command.
struct RunSettings {
  // The environment (NAME=VALUE entries); null: this process's.
  const std::vector<std::string>* env = nullptr;
  // Told the process's pid once it started, before its output is read.
  std::function<void(pid_t)> started;
};

// Runs `argv` (argv[0] a path) with this process's stdin; returns its exit code and everything
// it wrote. Internal when it cannot be started.
absl::StatusOr<ProcessResult> RunCaptured(const std::vector<std::string>& argv,
                                          const RunSettings& settings = {});

// Replaces this process with `argv`. Returns only on failure (then 127, with a message on
// stderr), like a shell.
int ExecReplacing(const std::vector<std::string>& argv);

}  // namespace kcache

#endif  // KCACHE_ENGINE_LAUNCHER_RUN_PROCESS_H_
