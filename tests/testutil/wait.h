// Waiting in a test for something another thread or process does: poll a condition until it
// holds or a generous deadline passes, instead of sleeping for a guess at how long it takes.
#ifndef KCACHE_TESTS_TESTUTIL_WAIT_H_
#define KCACHE_TESTS_TESTUTIL_WAIT_H_

#include <chrono>
#include <thread>

namespace kcache::testing {

// How long a test waits for a condition by default: long enough for a loaded 2-core CI machine
// running tests in parallel under sanitizers; a passing test waits only as long as it takes.
inline constexpr std::chrono::seconds kWaitTimeout{60};

// Calls `predicate` every 10 ms until it returns true (returns true) or `timeout` has passed
// (returns false, so that the caller's EXPECT_TRUE/ASSERT_TRUE fails and says what it waited
// for). `predicate` runs on the calling thread and is called at least once.
template <typename Predicate>
bool WaitFor(Predicate predicate, std::chrono::milliseconds timeout = kWaitTimeout) {
  auto give_up = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_WAIT_H_
