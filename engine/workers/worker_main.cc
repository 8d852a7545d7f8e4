// kcache-compile-worker: one of kcached's compile worker processes (docs/compile-workers.md).
// Enters its sandbox's namespaces, loads the toolkit once, restricts itself to reading the
// toolkit (sandbox.h), says hello on the socket at --fd, then compiles one job at a time until
// the daemon closes the socket, or dies with it. Started only by the process pool
// (worker_process.cc), which sets its memory limit and an empty environment before exec; the
// worker re-arms its CPU-time limit per job.
//
// Built twice from this file: kcache-compile-worker, and for tests only
// kcache-compile-worker-faulty (KCACHE_WORKER_FAULT_INJECTION), which crashes on a kernel
// whose source contains KCACHE_TEST_CRASH, spins forever on KCACHE_TEST_HANG, shuts its socket
// and stops itself on KCACHE_TEST_CLOSE_AND_STOP, sleeps <n> ms before compiling on
// KCACHE_TEST_SLEEP_MS:<n> (a slow compile), and on KCACHE_TEST_ESCAPE:<file> tries what its
// sandbox forbids and reports each attempt.
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/workers/sandbox.h"
#include "engine/workers/worker_protocol.h"

extern char** environ;

#if defined(__SANITIZE_ADDRESS__)
#define KCACHE_WORKER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KCACHE_WORKER_ASAN 1
#endif
#endif
#ifdef KCACHE_WORKER_ASAN
// AddressSanitizer builds only. LeakSanitizer's check at exit stops the process's threads with
// ptrace and reads /proc/self/maps; the sandbox refuses both, so a worker that returns from main
// would exit 1 with "LeakSanitizer has encountered a fatal error". ASan and UBSan stay on, and
// their reports go to stderr as in any process (docs/fuzzing.md, "Sanitizers").
extern "C" const char* __lsan_default_options() { return "detect_leaks=0"; }
#endif

namespace kcache {
namespace {

struct WorkerFlags {
  int fd = kWorkerSocketFd;
  std::string toolkit_root;
  int cpu_limit_seconds = 0;  // per job; 0 = none
};

bool ParseFlags(int argc, char** argv, WorkerFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg(argv[i]);
    bool ok = true;
    if (absl::ConsumePrefix(&arg, "--fd=")) {
      ok = absl::SimpleAtoi(arg, &flags->fd);
    } else if (absl::ConsumePrefix(&arg, "--toolkit=")) {
      flags->toolkit_root = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--cpu-limit-seconds=")) {
      ok = absl::SimpleAtoi(arg, &flags->cpu_limit_seconds);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "kcache-compile-worker: bad argument '%s'; this program is started by kcached "
                   "(usage: --fd=N --toolkit=ROOT --cpu-limit-seconds=N)\n",
                   argv[i]);
      return false;
    }
  }
  return !flags->toolkit_root.empty();
}

// A failed allocation ends the worker with an exit code the pool reports as "out of memory".
void OnAllocationFailure() { _exit(kWorkerExitOutOfMemory); }

double CpuSecondsUsed() {
  rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Allows this job `seconds` of CPU time: ITIMER_PROF sends SIGPROF when the process has used
// that much more (precise to the scheduler tick); RLIMIT_CPU, whole seconds of the process's
// total, sends SIGXCPU a second later as a backstop. Either signal ends the worker, and the
// pool reports the CPU-time limit.
void ArmCpuLimit(int seconds) {
  if (seconds <= 0) return;
  itimerval timer = {};
  timer.it_value.tv_sec = seconds;
  setitimer(ITIMER_PROF, &timer, nullptr);
  rlimit limit = {};
  getrlimit(RLIMIT_CPU, &limit);
  auto soft = static_cast<rlim_t>(std::ceil(CpuSecondsUsed() + seconds)) + 1;
  if (limit.rlim_max != RLIM_INFINITY && soft > limit.rlim_max) soft = limit.rlim_max;
  limit.rlim_cur = soft;
  setrlimit(RLIMIT_CPU, &limit);
}

void DisarmCpuLimit() {
  itimerval off = {};
  setitimer(ITIMER_PROF, &off, nullptr);
}

// /proc/self/statm, opened before the sandbox forbids opening it.
int statm_fd = -1;

// After a heavy compile glibc keeps hundreds of MB resident (about 330 MB after the MoE
// kernel, against 70 MB idle). Give it back then, and only then: trimming after every small
// compile costs the next one ~8 ms of page faults.
void TrimIfLarge() {
  constexpr long kTrimAboveBytes = 256L << 20;
  char text[128] = {};
  if (statm_fd < 0 || pread(statm_fd, text, sizeof(text) - 1, 0) <= 0) return;
  long pages_total = 0, pages_resident = 0;
  int read = std::sscanf(text, "%ld %ld", &pages_total, &pages_resident);
  if (read == 2 && pages_resident * sysconf(_SC_PAGESIZE) > kTrimAboveBytes) malloc_trim(0);
}

// What the sandbox lets a worker read: the toolkit's root and the folders its compiles
// include (-I options; a pip wheel's headers live in sibling wheels), nothing else.
std::vector<std::string> ReadableFolders(const Toolkit& toolkit) {
  std::vector<std::string> folders = {toolkit.root()};
  for (const std::string& option : toolkit.include_options()) {
    absl::string_view folder(option);
    if (absl::ConsumePrefix(&folder, "-I") && access(std::string(folder).c_str(), F_OK) == 0) {
      folders.emplace_back(folder);
    }
  }
  return folders;
}

// A worker dies with its daemon: when the daemon's end of the socket closes (it exited or was
// killed with SIGKILL), this thread ends the worker, even in the middle of a compile.
void DieWithDaemon(int fd) {
  std::thread([fd] {
    for (;;) {
      pollfd watch = {fd, POLLRDHUP, 0};
      if (poll(&watch, 1, -1) > 0 && (watch.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
        _exit(0);
      }
    }
  }).detach();
}

#ifdef KCACHE_WORKER_FAULT_INJECTION
std::string Attempt(const char* what, bool allowed) {
  return absl::StrCat(what, "=",
                      allowed ? "ALLOWED" : absl::StrCat("refused (", strerror(errno), ")"), "; ");
}

// What a compromised compiler would try, each attempt reported: the sandbox tests expect every
// one refused. `secret` is a file the test wrote outside the toolkit.
std::string TryToEscape(const std::string& secret) {
  std::string report;
  int fd = open(secret.c_str(), O_RDONLY | O_CLOEXEC);
  report += Attempt("read", fd >= 0);
  if (fd >= 0) close(fd);
  std::string created = absl::StrCat("/tmp/kcache-escape-", getpid());
  fd = open(created.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  report += Attempt("create", fd >= 0);
  if (fd >= 0) {
    close(fd);
    unlink(created.c_str());
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  report += Attempt("socket_inet", fd >= 0);
  if (fd >= 0) close(fd);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  report += Attempt("socket_unix", fd >= 0);
  if (fd >= 0) close(fd);
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  pid_t child = fork();
  if (child == 0) {
    execve(argv[0], argv, environ);
    _exit(errno == 0 ? 255 : errno);
  }
  int status = 0;
  waitpid(child, &status, 0);
  errno = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  report += Attempt("exec", WIFEXITED(status) && WEXITSTATUS(status) == 0);
  child = fork();
  if (child == 0) _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
  waitpid(child, &status, 0);
  errno = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  report += Attempt("unshare", WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int variables = 0;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) ++variables;
  absl::StrAppend(&report, "environment=", variables);
  return report;
}

absl::Status InjectFault(const CompileJob& job) {
  if (absl::StrContains(job.spec.source, "KCACHE_TEST_CRASH")) {
    signal(SIGSEGV, SIG_DFL);  // die by the signal, also where a sanitizer would catch it
    raise(SIGSEGV);
  }
  if (absl::StrContains(job.spec.source, "KCACHE_TEST_CLOSE_AND_STOP")) {
    if (fork() == 0) {  // once the worker has stopped, the daemon reads EOF
      usleep(200 * 1000);
      shutdown(kWorkerSocketFd, SHUT_RDWR);
      _exit(0);
    }
    raise(SIGSTOP);  // stopped, its socket-watching thread too: it will not exit by itself
  }
  if (absl::StrContains(job.spec.source, "KCACHE_TEST_HANG")) {
    volatile uint64_t spins = 0;
    for (;;) spins = spins + 1;
  }
  absl::string_view source(job.spec.source);
  if (size_t at = source.find("KCACHE_TEST_SLEEP_MS:"); at != absl::string_view::npos) {
    int millis = 0;
    absl::string_view digits = source.substr(at + strlen("KCACHE_TEST_SLEEP_MS:"));
    if (absl::SimpleAtoi(digits.substr(0, digits.find_first_not_of("0123456789")), &millis)) {
      absl::SleepFor(absl::Milliseconds(millis));
    }
  }
  if (size_t at = source.find("KCACHE_TEST_ESCAPE:"); at != absl::string_view::npos) {
    absl::string_view secret = source.substr(at + strlen("KCACHE_TEST_ESCAPE:"));
    secret = secret.substr(0, secret.find('\n'));
    return absl::AbortedError(absl::StrCat("escape: ", TryToEscape(std::string(secret))));
  }
  return absl::OkStatus();
}

// A worker run under a name containing "unsandboxed" behaves as on a kernel without Landlock
// and seccomp, for the tests of what kcached does there.
bool PretendNoSandbox(const char* argv0) { return absl::StrContains(argv0, "unsandboxed"); }
#else
absl::Status InjectFault(const CompileJob&) { return absl::OkStatus(); }
bool PretendNoSandbox(const char*) { return false; }
#endif

// NVRTC survives a failed allocation and reports it, as NVRTC_ERROR_OUT_OF_MEMORY or as a
// compile error whose log says "catastrophic error: out of memory". Either way it is the
// memory limit, not the source: ResourceExhausted, with the log kept.
absl::Status MapOutOfMemory(const CompileJob& job, const absl::Status& status) {
  bool out_of_memory =
      (status.code() == absl::StatusCode::kInternal &&
       absl::StrContains(status.message(), "NVRTC_ERROR_OUT_OF_MEMORY")) ||
      (status.code() == absl::StatusCode::kAborted &&
       absl::StrContains(CompileLogOf(status), "catastrophic error: out of memory"));
  if (!out_of_memory) return status;
  rlimit limit = {};
  getrlimit(RLIMIT_AS, &limit);
  std::string under = limit.rlim_cur == RLIM_INFINITY
                          ? std::string()
                          : absl::StrCat(" under the ", FormatBytes(limit.rlim_cur), " limit");
  absl::Status mapped = absl::ResourceExhaustedError(
      absl::StrCat("compile of ", DescribeJob(job), " ran out of memory", under,
                   " (--compile-memory-max-bytes); NVRTC said: ", status.message()));
  status.ForEachPayload([&mapped](absl::string_view type_url, const absl::Cord& value) {
    mapped.SetPayload(type_url, value);
  });
  return mapped;
}

internal::CompileReply RunJob(Compiler& compiler, const internal::CompileRequest& request,
                              int cpu_limit_seconds) {
  internal::CompileReply reply;
  double cpu_before = CpuSecondsUsed();
  absl::StatusOr<CompileJob> job = JobFromProto(request);
  if (!job.ok()) {
    *reply.mutable_status() = StatusToProto(job.status());
    return reply;
  }
  ArmCpuLimit(cpu_limit_seconds);
  absl::Status fault = InjectFault(*job);
  absl::StatusOr<CompileOutput> output =
      fault.ok() ? compiler.Compile(*job) : absl::StatusOr<CompileOutput>(fault);
  DisarmCpuLimit();
  TrimIfLarge();
  if (output.ok()) {
    OutputToProto(*std::move(output), &reply);
  } else {
    *reply.mutable_status() = StatusToProto(MapOutOfMemory(*job, output.status()));
  }
  reply.set_cpu_micros(static_cast<uint64_t>((CpuSecondsUsed() - cpu_before) * 1e6));
  return reply;
}

int WorkerMain(int argc, char** argv) {
  std::set_new_handler(OnAllocationFailure);
  WorkerFlags flags;
  if (!ParseFlags(argc, argv, &flags)) return kWorkerExitBadArguments;

  SandboxReport sandbox;
  sandbox.empty_environment = environ == nullptr || *environ == nullptr;
  bool sandbox_off = PretendNoSandbox(argv[0]);
  if (!sandbox_off) EnterSandboxNamespaces(&sandbox);  // while this is the only thread

  internal::WorkerHello hello;
  hello.set_protocol_version(kWorkerProtocolVersion);
  hello.set_pid(getpid());
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(flags.toolkit_root);
  if (!toolkit.ok()) {
    *hello.mutable_status() = StatusToProto(toolkit.status());
    (void)WriteFrame(flags.fd, hello, absl::InfiniteFuture());
    return 1;
  }
  statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  absl::Status restricted =
      sandbox_off ? absl::OkStatus() : RestrictSelf(ReadableFolders(**toolkit), &sandbox);
  if (!restricted.ok()) {
    *hello.mutable_status() = StatusToProto(absl::FailedPreconditionError(
        absl::StrCat("the compile worker could not enter its sandbox: ", restricted.message())));
    hello.set_sandbox(sandbox.Describe());  // says the failure is the sandbox's
    (void)WriteFrame(flags.fd, hello, absl::InfiniteFuture());
    return 1;
  }
  hello.set_toolkit_id((*toolkit)->identity().id);
  hello.set_sandboxed(sandbox.Complete());
  hello.set_sandbox(sandbox.Describe());
  if (!WriteFrame(flags.fd, hello, absl::InfiniteFuture()).ok()) return 1;
  DieWithDaemon(flags.fd);

  std::unique_ptr<Compiler> compiler = NewNvrtcCompiler(*toolkit);
  for (;;) {
    internal::CompileRequest request;
    absl::Status io = ReadFrame(flags.fd, &request, absl::InfiniteFuture());
    if (io.code() == absl::StatusCode::kUnavailable) return 0;  // the daemon closed: done
    if (!io.ok()) {
      std::fprintf(stderr, "kcache-compile-worker: %s\n", std::string(io.message()).c_str());
      return 1;
    }
    internal::CompileReply taken;
    taken.set_taken(true);
    if (!WriteFrame(flags.fd, taken, absl::InfiniteFuture()).ok()) return 0;
    internal::CompileReply reply = RunJob(*compiler, request, flags.cpu_limit_seconds);
    if (!WriteFrame(flags.fd, reply, absl::InfiniteFuture()).ok()) return 0;
  }
}

}  // namespace
}  // namespace kcache

int main(int argc, char** argv) { return kcache::WorkerMain(argc, argv); }
