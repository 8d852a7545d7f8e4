// Running the real compiler: with its output captured (a miss, to store it) or in place of
// this process (uncached: exec, nothing in between).
#ifndef KCACHE_ENGINE_OBJECTS_RUN_PROCESS_H_
#define KCACHE_ENGINE_OBJECTS_RUN_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kcache::objects {

struct ProcessResult {
  int exit_code = 0;  // 128 + signal when it was killed
  std::string stdout_text, stderr_text;
};

// Runs `argv` (argv[0] a path) with this process's environment and stdin; returns its exit
// code and everything it wrote. Internal when it cannot be started.
absl::StatusOr<ProcessResult> RunCaptured(const std::vector<std::string>& argv);

// Replaces this process with `argv`. Returns only on failure (then 127, with a message on
// stderr), like a shell.
int ExecReplacing(const std::vector<std::string>& argv);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_RUN_PROCESS_H_
