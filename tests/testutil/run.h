// Runs a command through the shell and captures its output and exit code.
#ifndef KCACHE_TESTS_TESTUTIL_RUN_H_
#define KCACHE_TESTS_TESTUTIL_RUN_H_

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/testutil/tree_paths.h"

namespace kcache::testing {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline RunResult Run(const std::string& command) {
  RunResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// True when `part` occurs in `text` (for checking what a command printed).
inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The kcache binary under test (ctest sets KCACHE_CLI).
inline std::string KcacheCli() {
  const char* cli = std::getenv("KCACHE_CLI");
  return cli ? cli : BinaryPath("client/cli/kcache");
}

// kcache-launch, beside kcache (where it hands what it does not serve).
inline std::string KcacheLaunch() {
  return (std::filesystem::path(KcacheCli()).parent_path() / "kcache-launch").string();
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_RUN_H_
