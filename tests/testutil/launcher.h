// Running kcache's compiler launchers in a test: a command line in a build directory with the
// launcher's environment, and what it said (KCACHE_LOG=1: "kcache: hit|miss|uncached ...").
#ifndef KCACHE_TESTS_TESTUTIL_LAUNCHER_H_
#define KCACHE_TESTS_TESTUTIL_LAUNCHER_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::testing {

// What a launcher did with one command, from its log line.
enum class Outcome { kHit, kMiss, kUncached, kUnknown };

inline Outcome OutcomeOf(const std::string& output) {
  if (Contains(output, "kcache: hit ")) return Outcome::kHit;
  if (Contains(output, "kcache: miss ")) return Outcome::kMiss;
  if (Contains(output, "kcache: uncached")) return Outcome::kUncached;
  return Outcome::kUnknown;
}

// Runs `command` (a shell command line naming the launcher, e.g. "$KCACHE nvcc -c ...") in
// `dir`, with KCACHE set to the kcache binary (KCACHE_LAUNCH to kcache-launch), the given
// environment assignments, the store or server, a private state directory and KCACHE_LOG=1.
struct LauncherEnv {
  std::string store;      // KCACHE_STORE
  std::string server;     // KCACHE_SERVER
  std::string state_dir;  // KCACHE_STATE_DIR
  std::string extra;      // more "NAME=VALUE ..." assignments
};

inline RunResult RunIn(const std::string& dir, const LauncherEnv& env, const std::string& command) {
  std::string assignments =
      absl::StrCat("KCACHE=", KcacheCli(), " KCACHE_LAUNCH=", KcacheLaunch(),
                   " KCACHE_LOG=1 KCACHE_STATE_DIR=", env.state_dir, " ", env.extra);
  if (!env.store.empty()) absl::StrAppend(&assignments, " KCACHE_STORE=", env.store);
  if (!env.server.empty()) absl::StrAppend(&assignments, " KCACHE_SERVER=", env.server);
  return Run(absl::StrCat("cd ", dir, " && env ", assignments, " sh -c '", command, "'"));
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether two files hold the same bytes (objects are not printed: only their sizes).
inline ::testing::AssertionResult SameFile(const std::string& a, const std::string& b) {
  std::string left = ReadAll(a), right = ReadAll(b);
  if (left == right && !left.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " (" << left.size() << " bytes) and " << b << " ("
                                       << right.size() << " bytes) differ or are empty";
}

// A fixture for launcher tests: a temp dir with a store and a state directory, and Build(),
// which runs a command in a (new) build directory and says what the launcher did.
class LauncherTest : public ::testing::Test {
 protected:
  LauncherTest() {
    env_.store = tmp_ / "store";
    env_.state_dir = tmp_ / "state";
  }

  // Runs `command` in tmp_/build (created) with `env` (default env_); expects it to succeed.
  Outcome Build(const std::string& build, const std::string& command,
                const LauncherEnv* env = nullptr) {
    std::filesystem::create_directories(tmp_ / build);
    RunResult result = RunIn(tmp_ / build, env ? *env : env_, command);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    last_output_ = result.output;
    return OutcomeOf(result.output);
  }

  TempDir tmp_;
  LauncherEnv env_;
  std::string last_output_;  // what the last Build printed
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_LAUNCHER_H_
