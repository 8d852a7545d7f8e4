// A compiler for tests of launchers that miss the same command at once: `gated-c++`, a script
// that stops itself (SIGSTOP) before it execs c++ for a compile (-c), until the test lets it go
// (SIGCONT). So a test knows a compile is running, and holds it while another launcher comes.
// The script writes no file (a compile that writes files besides its outputs is not stored):
// what it compiles is stored as any c++ compile.
//
// Not thread-safe: one test thread drives it (its own thread only lets instances go).
// GatedLaunchTest below is a fixture around it.
#ifndef KCACHE_TESTS_TESTUTIL_GATED_COMPILER_H_
#define KCACHE_TESTS_TESTUTIL_GATED_COMPILER_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testutil/client_objects.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/wait.h"

namespace kcache::testing {

// A /proc file's bytes; "" when its process is gone (reading it then fails, and a stream would
// throw).
inline std::string ReadProcFile(const std::string& path) {
  std::string bytes;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) bytes.append(buffer, static_cast<size_t>(n));
  close(fd);
  return n < 0 ? "" : bytes;
}

class GatedCompiler {
 public:
  static constexpr char kName[] = "gated-c++";

  // Writes the script at `dir`/bin/gated-c++.
  explicit GatedCompiler(const TempDir& dir) : path_(absl::StrCat(dir / "bin", "/", kName)) {
    std::filesystem::create_directories(dir / "bin");
    std::ofstream(path_) << "#!/bin/sh\ncase \" $* \" in *\" -c \"*) kill -STOP $$;; esac\n"
                            "exec c++ \"$@\"\n";
    chmod(path_.c_str(), 0755);
  }
  ~GatedCompiler() {
    open_ = false;
    if (opener_.joinable()) opener_.join();
    for (pid_t pid : Instances()) kill(pid, SIGKILL);
  }
  GatedCompiler(const GatedCompiler&) = delete;
  GatedCompiler& operator=(const GatedCompiler&) = delete;

  const std::string& path() const { return path_; }

  // The script's instances running now: its path in their command line and its name as theirs
  // (the kernel names a process running a script after the script). Not the launchers that
  // have its path as an argument: a SIGCONT sent to one of them would cancel the SIGSTOP with
  // which LeakSanitizer stops its threads at exit, and leave the launcher hung.
  std::vector<pid_t> Instances() const {
    std::vector<pid_t> pids;
    std::error_code error;  // never thrown: a process that ends meanwhile is skipped
    for (std::filesystem::directory_iterator it("/proc", error), end; !error && it != end;
         it.increment(error)) {
      std::string name = it->path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      if (ReadProcFile(it->path() / "comm") != absl::StrCat(kName, "\n")) continue;
      std::string cmdline = ReadProcFile(it->path() / "cmdline");
      size_t at = cmdline.find(path_ + '\0');
      if (at != std::string::npos && (at == 0 || cmdline[at - 1] == '\0')) {
        pids.push_back(static_cast<pid_t>(std::stol(name)));
      }
    }
    return pids;
  }

  // The instances stopped at the gate now.
  std::vector<pid_t> Stopped() const {
    std::vector<pid_t> stopped;
    for (pid_t pid : Instances()) {
      std::string stat = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
      size_t paren = stat.rfind(')');
      if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T') {
        stopped.push_back(pid);
      }
    }
    return stopped;
  }

  // Waits (up to kWaitTimeout) until `count` instances are stopped at the gate.
  bool WaitStopped(size_t count) {
    return WaitFor([&] { return Stopped().size() >= count; });
  }

  // The launcher that started a stopped instance (its parent).
  static pid_t LauncherOf(pid_t instance) {
    std::string stat = ReadProcFile("/proc/" + std::to_string(instance) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) return 0;
    std::string state;
    pid_t parent = 0;
    std::istringstream(stat.substr(paren + 2)) >> state >> parent;
    return parent;
  }

  // Lets every instance go, now and as each reaches the gate, until destroyed.
  void Open() {
    if (open_.exchange(true)) return;
    opener_ = std::thread([this] {
      while (open_) {
        for (pid_t pid : Instances()) kill(pid, SIGCONT);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }

 private:
  std::string path_;
  std::atomic<bool> open_{false};
  std::thread opener_;
};

// A fixture for launchers that miss the same command at once through real kcacheds: the gated
// compiler, its command, and launchers started on threads of their own.
class GatedLaunchTest : public ClientObjectTest {
 protected:
  void SetUp() override {
    ClientObjectTest::SetUp();
    if (IsSkipped()) return;
    gate_ = std::make_unique<GatedCompiler>(tmp_);
  }

  // Starts the fleet's Redis Cluster: false when the test skips or failed.
  bool StartFleet() {
    StartCluster();
    return !IsSkipped() && !HasFatalFailure();
  }

  // The command compiling `source` (default the test's) with the gated compiler.
  std::string Compile(const std::string& source = "", const std::string& flags = "") const {
    return absl::StrCat("$KCACHE_LAUNCH ", gate_->path(), " -O2 ", flags, " -c ",
                        source.empty() ? src_ : source, " -o answer.o");
  }

  // Runs `command` in tmp_/`build` through `daemon` (with `extra` assignments) on a thread of
  // its own: what it printed and its exit code, later.
  std::future<RunResult> Launch(DaemonProcess& daemon, const std::string& build,
                                const std::string& command, const std::string& extra = "") {
    LauncherEnv env = env_;
    env.store.clear();
    env.server = daemon.address();
    env.extra = extra;
    std::filesystem::create_directories(tmp_ / build);
    std::string dir = tmp_ / build;
    return std::async(std::launch::async, [dir, env, command] { return RunIn(dir, env, command); });
  }

  std::unique_ptr<GatedCompiler> gate_;
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_GATED_COMPILER_H_
