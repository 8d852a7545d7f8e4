// kcache-compile-worker: one of kcached's compile worker processes (docs/compile-workers.md).
// Loads the toolkit once, says hello on the socket at --fd, then compiles one job at a time
// until the daemon closes the socket. Started only by the process pool (worker_process.cc),
// which sets its memory limit before exec; the worker re-arms its CPU-time limit per job.
//
// Built twice from this file: kcache-compile-worker, and for tests only
// kcache-compile-worker-faulty (KCACHE_WORKER_FAULT_INJECTION), which crashes on a kernel
// whose source contains KCACHE_TEST_CRASH and spins forever on KCACHE_TEST_HANG.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <new>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/workers/worker_protocol.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"

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

// After a heavy compile glibc keeps hundreds of MB resident (about 330 MB after the MoE
// kernel, against 70 MB idle). Give it back then, and only then: trimming after every small
// compile costs the next one ~8 ms of page faults.
void TrimIfLarge() {
  constexpr long kTrimAboveBytes = 256L << 20;
  long pages_total = 0, pages_resident = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return;
  int read = std::fscanf(statm, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(statm);
  if (read == 2 && pages_resident * sysconf(_SC_PAGESIZE) > kTrimAboveBytes) malloc_trim(0);
}

#ifdef KCACHE_WORKER_FAULT_INJECTION
void InjectFault(const CompileJob& job) {
  if (absl::StrContains(job.spec.source, "KCACHE_TEST_CRASH")) raise(SIGSEGV);
  if (absl::StrContains(job.spec.source, "KCACHE_TEST_HANG")) {
    volatile uint64_t spins = 0;
    for (;;) spins = spins + 1;
  }
}
#else
void InjectFault(const CompileJob&) {}
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
                   " (--compile-memory-mb); NVRTC said: ", status.message()));
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
  InjectFault(*job);
  absl::StatusOr<CompileOutput> output = compiler.Compile(*job);
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

  internal::WorkerHello hello;
  hello.set_protocol_version(kWorkerProtocolVersion);
  hello.set_pid(getpid());
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(flags.toolkit_root);
  if (!toolkit.ok()) {
    *hello.mutable_status() = StatusToProto(toolkit.status());
    (void)WriteFrame(flags.fd, hello, absl::InfiniteFuture());
    return 1;
  }
  hello.set_toolkit_id((*toolkit)->identity().id);
  if (!WriteFrame(flags.fd, hello, absl::InfiniteFuture()).ok()) return 1;

  std::unique_ptr<Compiler> compiler = NewNvrtcCompiler(*toolkit);
  for (;;) {
    internal::CompileRequest request;
    absl::Status io = ReadFrame(flags.fd, &request, absl::InfiniteFuture());
    if (io.code() == absl::StatusCode::kUnavailable) return 0;  // the daemon closed: done
    if (!io.ok()) {
      std::fprintf(stderr, "kcache-compile-worker: %s\n", std::string(io.message()).c_str());
      return 1;
    }
    internal::CompileReply reply = RunJob(*compiler, request, flags.cpu_limit_seconds);
    if (!WriteFrame(flags.fd, reply, absl::InfiniteFuture()).ok()) return 0;
  }
}

}  // namespace
}  // namespace kcache

int main(int argc, char** argv) { return kcache::WorkerMain(argc, argv); }
