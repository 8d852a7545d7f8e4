#include "engine/workers/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/workers/worker_protocol.h"

namespace kcache {
namespace {

// argv or envp for execve: owns the strings, hands out the char* array.
class CStrings {
 public:
  void Add(std::string s) { strings_.push_back(std::move(s)); }
  char* const* Get() {
    pointers_.clear();
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
    return pointers_.data();
  }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

CStrings WorkerArgv(const WorkerLaunch& launch) {
  CStrings argv;
  argv.Add(launch.binary);
  argv.Add(absl::StrCat("--fd=", kWorkerSocketFd));
  argv.Add(absl::StrCat("--toolkit=", launch.toolkit_root));
  argv.Add(absl::StrCat("--cpu-limit-seconds=", launch.limits.cpu_seconds));
  return argv;
}

// The worker's whole environment: `extra` (tests), nothing of ours. The daemon's environment
// may hold secrets, and a compile has no use for it.
CStrings WorkerEnv(const std::vector<std::pair<std::string, std::string>>& extra) {
  CStrings env;
  for (const auto& [name, value] : extra) env.Add(absl::StrCat(name, "=", value));
  return env;
}

// In the forked child, which shares our memory image but has only this thread: only
// async-signal-safe calls from here to execve.
[[noreturn]] void ExecWorker(int sock, char* const* argv, char* const* envp,
                             uint64_t memory_bytes) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // ignored ones survive exec
  setpgid(0, 0);  // a terminal's ^C goes to the daemon, which shuts its workers down
  if (sock == kWorkerSocketFd) {
    fcntl(sock, F_SETFD, 0);
  } else if (dup2(sock, kWorkerSocketFd) < 0) {
    _exit(kWorkerExitExecFailed);
  }
  // Nothing to read on stdin, nothing to say on stdout (the daemon's may be a terminal or a
  // log pipe); stderr stays shared for the worker's own diagnostics.
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
  }
  if (close_range(kWorkerSocketFd + 1, ~0U, 0) != 0) {
    for (int fd = kWorkerSocketFd + 1; fd < 65536; ++fd) close(fd);
  }
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (memory_bytes > 0) {
    struct rlimit as = {memory_bytes, memory_bytes};
    setrlimit(RLIMIT_AS, &as);
  }
  execve(argv[0], argv, envp);
  _exit(kWorkerExitExecFailed);
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(const WorkerLaunch& launch) {
  CStrings argv = WorkerArgv(launch);
  CStrings envp = WorkerEnv(launch.extra_env);
  char* const* argv_p = argv.Get();
  char* const* envp_p = envp.Get();
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("could not create a socket for a compile worker: ", strerror(errno)));
  }
  pid_t pid = fork();  // exec follows at once: the daemon's threads never run in the child
  if (pid == 0) ExecWorker(fds[1], argv_p, envp_p, launch.limits.memory_bytes);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return absl::ResourceExhaustedError(
        absl::StrCat("could not fork a compile worker: ", strerror(errno)));
  }
  std::unique_ptr<WorkerProcess> worker(new WorkerProcess(pid, fds[0], launch));
  if (absl::Status s = worker->ReadHello(); !s.ok()) return s;
  return worker;
}

WorkerProcess::WorkerProcess(pid_t pid, int fd, const WorkerLaunch& launch)
    : pid_(pid), fd_(fd), launch_(launch) {}

WorkerProcess::~WorkerProcess() {
  close(fd_);
  if (!reaped_) Reap(absl::Seconds(1));
}

absl::Status WorkerProcess::ReadHello() {
  internal::WorkerHello hello;
  absl::Status io = ReadFrame(fd_, &hello, absl::Now() + launch_.startup_timeout);
  if (!io.ok()) {
    if (io.code() == absl::StatusCode::kDeadlineExceeded) {
      KillAndReap();
      return absl::UnavailableError(
          absl::StrCat("the compile worker ", launch_.binary, " did not get ready within ",
                       absl::FormatDuration(launch_.startup_timeout), "; it was killed"));
    }
    int status = Reap(absl::Seconds(2));
    if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitExecFailed) {
      return absl::FailedPreconditionError(
          absl::StrCat("could not execute the compile worker ", launch_.binary,
                       "; build the kcache_compile_worker target or pass --compile-worker PATH"));
    }
    return absl::UnavailableError(absl::StrCat(
        "the compile worker ", launch_.binary, " stopped before it was ready (",
        WIFSIGNALED(status) ? SignalName(WTERMSIG(status))
                            : absl::StrCat("exit status ", WEXITSTATUS(status)),
        launch_.limits.memory_bytes > 0
            ? absl::StrCat("; its memory limit is ", FormatBytes(launch_.limits.memory_bytes))
            : "",
        ")"));
  }
  if (hello.protocol_version() != kWorkerProtocolVersion) {
    KillAndReap();
    return absl::FailedPreconditionError(
        absl::StrCat("the compile worker ", launch_.binary, " speaks protocol version ",
                     hello.protocol_version(), ", this daemon ", kWorkerProtocolVersion,
                     "; install the worker that was built with this kcached"));
  }
  if (absl::Status s = StatusFromProto(hello.status()); !s.ok()) {
    Reap(absl::Seconds(2));
    if (!hello.sandbox().empty()) return s;  // the sandbox failed, not the toolkit
    // The daemon loaded this toolkit itself, so a worker that cannot is most likely short of
    // address space: an idle worker maps about 230 MB (libnvrtc, builtins, nvJitLink).
    std::string limit =
        launch_.limits.memory_bytes == 0
            ? std::string()
            : absl::StrCat(" under its ", FormatBytes(launch_.limits.memory_bytes),
                           " memory limit (--compile-memory-max-bytes; a worker maps about 230 MB "
                           "before it compiles anything, so allow at least 1 GiB)");
    return absl::FailedPreconditionError(
        absl::StrCat("the compile worker could not load the toolkit", limit, ": ", s.message()));
  }
  if (hello.toolkit_id() != launch_.expected_toolkit_id) {
    KillAndReap();
    return absl::FailedPreconditionError(
        absl::StrCat("the compile worker loaded toolkit ", hello.toolkit_id(), " from ",
                     launch_.toolkit_root, " but the daemon has ", launch_.expected_toolkit_id,
                     "; the toolkit changed on disk while the daemon runs: restart kcached"));
  }
  sandboxed_ = hello.sandboxed();
  sandbox_ = hello.sandbox();
  return absl::OkStatus();
}

bool WorkerProcess::Usable() {
  if (reaped_ || fate_ != WorkerFate::kAlive) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    fate_ = WorkerFate::kCrashed;
    return false;
  }
  return true;
}

absl::StatusOr<CompileOutput> WorkerProcess::Run(const CompileJob& job) {
  absl::Time deadline = launch_.limits.wall == absl::InfiniteDuration()
                            ? absl::InfiniteFuture()
                            : absl::Now() + launch_.limits.wall;
  last_job_cpu_micros_ = 0;
  took_job_ = false;
  absl::Status io = WriteFrame(fd_, JobToProto(job), deadline);
  internal::CompileReply reply;
  if (io.ok()) io = ReadFrame(fd_, &reply, deadline);
  if (io.ok() && !reply.taken())
    io = absl::DataLossError("the worker answered a job it never took");
  if (io.ok()) {
    took_job_ = true;
    io = ReadFrame(fd_, &reply, deadline);
  }
  if (!io.ok()) return Fail(job, io);
  last_job_cpu_micros_ = reply.cpu_micros();
  if (absl::Status s = StatusFromProto(reply.status()); !s.ok()) return s;
  absl::StatusOr<CompileOutput> output = OutputFromProto(&reply);
  if (!output.ok()) return Fail(job, output.status());
  return output;
}

absl::Status WorkerProcess::Fail(const CompileJob& job, const absl::Status& io) {
  if (io.code() == absl::StatusCode::kDeadlineExceeded) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // it died just as time ran out
      reaped_ = true;
      return ExplainExit(job, status);
    }
    KillAndReap();
    fate_ = WorkerFate::kTimedOut;
    return absl::DeadlineExceededError(
        absl::StrCat("compile of ", DescribeJob(job), " ran past the ",
                     absl::ToDoubleSeconds(launch_.limits.wall),
                     " s wall-clock limit (--compile-timeout-seconds); the worker was killed"));
  }
  if (io.code() == absl::StatusCode::kUnavailable) return ExplainExit(job, Reap(absl::Seconds(2)));
  KillAndReap();  // it broke the protocol: a worker we cannot trust
  fate_ = WorkerFate::kCrashed;
  return absl::InternalError(absl::StrCat("the compile worker's reply for ", DescribeJob(job),
                                          " was unusable (", io.message(),
                                          "); the worker was replaced"));
}

absl::Status WorkerProcess::ExplainExit(const CompileJob& job, int status) {
  const std::string what = DescribeJob(job);
  const std::string memory =
      launch_.limits.memory_bytes > 0
          ? absl::StrCat(" under the ", FormatBytes(launch_.limits.memory_bytes), " limit")
          : std::string();
  if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGPROF || WTERMSIG(status) == SIGXCPU)) {
    fate_ = WorkerFate::kLimitKilled;
    return absl::ResourceExhaustedError(
        absl::StrCat("compile of ", what, " ran past the ", launch_.limits.cpu_seconds,
                     " s CPU-time limit (--compile-cpu-seconds); the worker was killed"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitOutOfMemory) {
    fate_ = WorkerFate::kLimitKilled;
    return absl::ResourceExhaustedError(
        absl::StrCat("compile of ", what, " ran out of memory", memory,
                     " (--compile-memory-max-bytes); the worker was stopped"));
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && killed_here_) {
    fate_ = WorkerFate::kCrashed;
    return absl::InternalError(absl::StrCat(
        "the compile worker closed its socket while compiling ", what,
        " but did not exit, so kcached killed it; the daemon keeps serving and starts a new "
        "worker"));
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {  // not ours
    fate_ = WorkerFate::kLimitKilled;
    killed_outside_ = true;
    return absl::ResourceExhaustedError(absl::StrCat(
        "the compile worker was killed (SIGKILL) while compiling ", what,
        ", most likely by the kernel's out-of-memory killer; give the daemon more memory or "
        "lower --compile-workers"));
  }
  fate_ = WorkerFate::kCrashed;
  std::string how = WIFSIGNALED(status) ? absl::StrCat("crashed (signal ", WTERMSIG(status), ", ",
                                                       SignalName(WTERMSIG(status)), ")")
                                        : absl::StrCat("exited with status ", WEXITSTATUS(status));
  return absl::InternalError(absl::StrCat("compile worker ", how, " while compiling ", what,
                                          "; the daemon keeps serving and starts a new worker"));
}

int WorkerProcess::Reap(absl::Duration grace) {
  absl::Time give_up = absl::Now() + grace;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (absl::Now() >= give_up) {
      kill(pid_, SIGKILL);
      killed_here_ = true;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  reaped_ = true;
  return status;
}

void WorkerProcess::KillAndReap() {
  kill(pid_, SIGKILL);
  killed_here_ = true;
  Reap(absl::Seconds(5));
}

}  // namespace kcache
