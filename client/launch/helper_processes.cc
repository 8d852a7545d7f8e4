#include "client/launch/helper_processes.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/file_io.h"

extern char** environ;

namespace kcache::launch {

namespace fs = std::filesystem;

std::string FindKcacheBeside(const void* anchor) {
  Dl_info info;
  if (dladdr(anchor, &info) == 0 || info.dli_fname == nullptr) return "";
  fs::path dir = fs::path(info.dli_fname).parent_path();
  for (fs::path candidate : {dir / "../kcache", dir / "../../../bin/kcache"}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) {
      return fs::weakly_canonical(candidate, ec).string();
    }
  }
  return "";
}

namespace {

// Starts `kcache args...`, its standard input a memfd holding `input` and, when `stdout_fd` is
// not -1, its standard output that descriptor.
absl::StatusOr<pid_t> Spawn(const std::string& kcache, const std::vector<std::string>& args,
                            absl::string_view input, int stdout_fd) {
  int fd = memfd_create("kcache-input", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", strerror(errno)));
  if (absl::Status written = WriteFull(fd, input); !written.ok()) {
    close(fd);
    return absl::InternalError(absl::StrCat("writing the input: ", written.message()));
  }
  lseek(fd, 0, SEEK_SET);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, STDIN_FILENO);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  std::vector<std::string> owned = {kcache};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : owned) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, kcache.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  if (spawned != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", kcache, ": ", strerror(spawned)));
  }
  return pid;
}

}  // namespace

HelperProcesses::HelperProcesses(std::string kcache, size_t max_running)
    : kcache_(std::move(kcache)), max_running_(max_running) {}

void HelperProcesses::Reap(bool wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  absl::Time until = absl::Now() + kExitWait;
  for (;;) {
    std::vector<pid_t> running;
    for (pid_t pid : running_) {
      int status = 0;
      pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) running.push_back(pid);
      // Else reaped, or not ours to reap (a SIGCHLD handler of the caller's took it).
    }
    running_ = std::move(running);
    if (!wait || running_.empty() || absl::Now() > until) return;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

absl::Status HelperProcesses::Start(const std::vector<std::string>& args, absl::string_view input,
                                    absl::Duration slot_wait) {
  if (kcache_.empty()) return absl::FailedPreconditionError("no kcache beside this library");
  absl::Time give_up = absl::Now() + slot_wait;
  for (;;) {
    Reap(false);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (running_.size() < max_running_) break;
    }
    if (absl::Now() > give_up) {
      return absl::ResourceExhaustedError(absl::StrCat(
          max_running_, " kcache processes still running after ", absl::FormatDuration(slot_wait)));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  absl::StatusOr<pid_t> pid = Spawn(kcache_, args, input, -1);
  if (!pid.ok()) return pid.status();
  std::lock_guard<std::mutex> lock(mutex_);
  running_.push_back(*pid);
  return absl::OkStatus();
}

absl::StatusOr<std::string> HelperProcesses::Ask(const std::vector<std::string>& args,
                                                 absl::string_view input, absl::Duration timeout,
                                                 size_t max_output) {
  if (kcache_.empty()) return absl::FailedPreconditionError("no kcache beside this library");
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  absl::StatusOr<pid_t> pid = Spawn(kcache_, args, input, out[1]);
  close(out[1]);
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  absl::StatusOr<std::string> output = ReadToEnd(out[0], max_output, absl::Now() + timeout);
  close(out[0]);
  if (!output.ok()) kill(*pid, SIGKILL);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!output.ok()) return output.status();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnknownError(absl::StrCat(
        "kcache ", args.empty() ? "" : args.front(), " failed (",
        WIFEXITED(status) ? absl::StrCat("exit code ", WEXITSTATUS(status))
                          : absl::StrCat("signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0),
        ")"));
  }
  return output;
}

}  // namespace kcache::launch
