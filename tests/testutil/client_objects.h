// Client-made objects through real kcached processes: a launcher compile (the real c++) and
// the Redis door (redis-cli on a unix socket) on each daemon, and a fleet of them on a real
// Redis Cluster, for the fleet-sharing, export and turn tests. Skips without c++ or redis-cli
// (and redis-server for a fleet).
#ifndef KCACHE_TESTS_TESTUTIL_CLIENT_OBJECTS_H_
#define KCACHE_TESTS_TESTUTIL_CLIENT_OBJECTS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testutil/daemon_counters.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/redis_cluster.h"
#include "tests/testutil/run.h"

namespace kcache::testing {

class ClientObjectTest : public LauncherTest {
 protected:
  void SetUp() override {
    if (::kcache::testing::Run("command -v c++ && redis-cli --version").exit_code != 0) {
      GTEST_SKIP() << "c++ or redis-cli missing";
    }
    src_ = tmp_.Write("src/answer.cpp", "int answer() { return 42; }\n");
  }

  // A kcached (no toolkit) with a Redis door on <its dir>/redis.sock and `flags`.
  DaemonProcess& StartDaemon(std::vector<std::string> flags, std::vector<std::string> baked = {}) {
    DaemonOptions options;
    options.baked = std::move(baked);
    daemons_.push_back(std::make_unique<DaemonProcess>(options));
    DaemonProcess& daemon = *daemons_.back();
    options.extra_flags = {"--no-toolkit", "--redis-listen",
                           absl::StrCat("unix:", daemon.dir(), "/redis.sock")};
    options.extra_flags.insert(options.extra_flags.end(), flags.begin(), flags.end());
    daemon.options().extra_flags = options.extra_flags;
    absl::Status started = daemon.Start();
    EXPECT_TRUE(started.ok()) << started;
    return daemon;
  }

  // Starts the six-node Redis Cluster a fleet's kcacheds share, and their key file; skips
  // without redis-server.
  void StartCluster() {
    if (!RedisAvailable()) GTEST_SKIP() << "redis-server or redis-cli missing";
    ASSERT_TRUE(cluster_.StartCluster()) << cluster_.error();
    key_file_ = tmp_.Write("shared.key", "client-objects-test-key-of-32-bytes-or-more\n");
  }

  // A kcached of the fleet: on the cluster, sharing client objects when `share`, with `more`
  // flags. A generous lookup budget: a loaded test machine must not turn a lookup into an error.
  DaemonProcess& StartOnCluster(bool share, std::vector<std::string> more = {}) {
    std::vector<std::string> flags = {"--shared", cluster_.Url(),       "--shared-key-file",
                                      key_file_,  "--shared-budget-ms", "10000"};
    if (share) flags.push_back("--share-client-objects");
    flags.insert(flags.end(), more.begin(), more.end());
    return StartDaemon(flags);
  }

  // Compiles the test's source in tmp_/`build` through `daemon`: what the launcher did.
  Outcome BuildThrough(DaemonProcess& daemon, const std::string& build) {
    LauncherEnv remote = env_;
    remote.store.clear();
    remote.server = daemon.address();
    return Build(build, absl::StrCat("$KCACHE c++ -O2 -c ", src_, " -o answer.o"), &remote);
  }

  // redis-cli against `daemon`'s door; its output without the trailing newline.
  static std::string Door(DaemonProcess& daemon, const std::string& args) {
    std::string out =
        ::kcache::testing::Run(absl::StrCat("redis-cli -s ", daemon.dir(), "/redis.sock ", args))
            .output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  // A counter of `daemon`, and a wait for one (tests/testutil/daemon_counters.h).
  static int64_t Counter(DaemonProcess& daemon, const std::string& name) {
    return DaemonCounter(daemon, name);
  }
  static int64_t WaitCounter(DaemonProcess& daemon, const std::string& name, int64_t value) {
    return WaitDaemonCounter(daemon, name, value);
  }

  std::string src_;
  RedisServers cluster_;  // started by StartCluster; declared before the kcacheds using it
  std::string key_file_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_CLIENT_OBJECTS_H_
