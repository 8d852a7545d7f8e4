#include "client/cli/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace kcache::cli {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

std::atomic<pid_t> child_pid{0};

void HandOn(int signal, siginfo_t* info, void*) {
  // si_code > 0: the kernel sent it (a terminal's ^C goes to the whole group, the child too).
  pid_t child = child_pid.load();
  if (child > 0 && info != nullptr && info->si_code <= 0) kill(child, signal);
}

}  // namespace

absl::StatusOr<int> RunChild(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  // The child reports a failed exec through a close-on-exec pipe: nothing read means it ran.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ", argv[0], ": ", strerror(errno)));
  }
  struct sigaction hand_on {
  }, old[std::size(kForwarded)];
  hand_on.sa_sigaction = HandOn;
  hand_on.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&hand_on.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &hand_on, &old[i]);
  pid_t pid = fork();
  if (pid == 0) {
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
    close(report[0]);
    execvp(args[0], args.data());
    int error = errno;
    (void)!write(report[1], &error, sizeof(error));
    _exit(127);
  }
  close(report[1]);
  if (pid < 0) {
    int error = errno;
    close(report[0]);
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ", argv[0], ": ", strerror(error)));
  }
  child_pid.store(pid);
  int error = 0;
  ssize_t n;
  do {
    n = read(report[0], &error, sizeof(error));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  child_pid.store(0);
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
  if (n == static_cast<ssize_t>(sizeof(error))) {
    std::string message = absl::StrCat("cannot run ", argv[0], ": ", strerror(error));
    return error == ENOENT ? absl::NotFoundError(message) : absl::PermissionDeniedError(message);
  }
  return status;
}

int ExitLike(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    int signal = WTERMSIG(status);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signal, &default_action, nullptr);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    raise(signal);
    return 128 + signal;
  }
  return 1;
}

}  // namespace kcache::cli
