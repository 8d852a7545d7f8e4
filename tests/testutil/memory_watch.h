// What hostile-client tests watch while they attack a real kcached: its resident memory
// (VmRSS from /proc, sampled by a thread of its own), and a well-behaved client that keeps
// asking and must keep getting answers throughout.
#ifndef KCACHE_TESTS_TESTUTIL_MEMORY_WATCH_H_
#define KCACHE_TESTS_TESTUTIL_MEMORY_WATCH_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace kcache::testing {

// Memory a process may keep beside what it holds on purpose: the allocator's caches, and under
// AddressSanitizer its shadow and quarantine (kept small by SmallAsanQuarantine).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr uint64_t kAllocatorSlackBytes = uint64_t{64} << 20;
#else
inline constexpr uint64_t kAllocatorSlackBytes = uint64_t{24} << 20;
#endif

// Under AddressSanitizer, freed memory waits in a quarantine (256 MiB by default) before it is
// reused, and counts in the resident set: processes started after this call (a kcached under
// test) keep at most 4 MiB there, so their RSS tracks what they hold. Nothing otherwise.
inline void SmallAsanQuarantine() {
#if defined(__SANITIZE_ADDRESS__)
  const char* options = std::getenv("ASAN_OPTIONS");
  std::string value = options != nullptr ? std::string(options) + ":" : std::string();
  setenv("ASAN_OPTIONS", (value + "quarantine_size_mb=4").c_str(), 1);
#endif
}

// One "Name:  N kB" line of /proc/PID/status in bytes, 0 when it cannot be read (the process is
// gone).
inline uint64_t StatusBytes(pid_t pid, const std::string& name) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name, 0) == 0) return std::stoull(line.substr(name.size())) * 1024;  // in kB
  }
  return 0;
}

// The resident set of `pid` in bytes (VmRSS), 0 when it cannot be read (the process is gone).
inline uint64_t ResidentBytes(pid_t pid) { return StatusBytes(pid, "VmRSS:"); }

// The largest resident set `pid` had (VmHWM), since it started or since ResetPeakResident: the
// kernel's own record, which no sampling misses.
inline uint64_t PeakResidentBytes(pid_t pid) { return StatusBytes(pid, "VmHWM:"); }

// Sets `pid`'s VmHWM to its resident set now (writes 5 to /proc/PID/clear_refs; Linux 4.0 on);
// false when that cannot be written.
inline bool ResetPeakResident(pid_t pid) {
  std::ofstream clear("/proc/" + std::to_string(pid) + "/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

// Samples ResidentBytes(pid) every 2 ms until destroyed or Stop; peak() is the largest seen.
class RssSampler {
 public:
  explicit RssSampler(pid_t pid) : pid_(pid), thread_([this] { Run(); }) {}
  ~RssSampler() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t peak() const { return peak_.load(); }

 private:
  void Run() {
    while (!stop_) {
      uint64_t now = ResidentBytes(pid_);
      if (now > peak_) peak_ = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  const pid_t pid_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> peak_{0};
  std::thread thread_;
};

// Calls `ask` (true: answered as expected) in a loop on a thread of its own until destroyed or
// Stop: answered() and failed() count the outcomes.
class SteadyClient {
 public:
  explicit SteadyClient(std::function<bool()> ask)
      : ask_(std::move(ask)), thread_([this] { Run(); }) {}
  ~SteadyClient() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int answered() const { return answered_.load(); }
  int failed() const { return failed_.load(); }

 private:
  void Run() {
    while (!stop_) {
      (ask_() ? answered_ : failed_)++;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::function<bool()> ask_;
  std::atomic<bool> stop_{false};
  std::atomic<int> answered_{0}, failed_{0};
  std::thread thread_;
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_MEMORY_WATCH_H_
