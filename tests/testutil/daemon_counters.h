// A running kcached's counters as `kcache stat --json --server` prints them, for tests that
// watch what a daemon counted.
#ifndef KCACHE_TESTS_TESTUTIL_DAEMON_COUNTERS_H_
#define KCACHE_TESTS_TESTUTIL_DAEMON_COUNTERS_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/run.h"

namespace kcache::testing {

// Every counter by name; an empty object when `kcache stat` fails.
inline nlohmann::json DaemonCounters(DaemonProcess& daemon) {
  RunResult stat = Run(absl::StrCat(KcacheCli(), " stat --json --server ", daemon.address()));
  if (stat.exit_code != 0) return nlohmann::json::object();
  return nlohmann::json::parse(stat.output)["counters"];
}

// One counter; -1 when it cannot be read.
inline int64_t DaemonCounter(DaemonProcess& daemon, const std::string& name) {
  nlohmann::json counters = DaemonCounters(daemon);
  return counters.contains(name) ? counters[name].get<int64_t>() : -1;
}

// Waits (up to 30 s) until `daemon` counts `value` in `name`; the last value read.
inline int64_t WaitDaemonCounter(DaemonProcess& daemon, const std::string& name, int64_t value) {
  int64_t now = DaemonCounter(daemon, name);
  for (int tries = 0; now != value && tries < 300; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = DaemonCounter(daemon, name);
  }
  return now;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_DAEMON_COUNTERS_H_
