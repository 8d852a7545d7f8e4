// One compile worker process (kcache-compile-worker) as the daemon sees it: started with
// fork + exec under resource limits, spoken to over a socketpair (worker_protocol.h), killed
// when a job runs past its wall-clock limit. The process pool (process_pool.h) owns several.
#ifndef KCACHE_ENGINE_WORKERS_WORKER_PROCESS_H_
#define KCACHE_ENGINE_WORKERS_WORKER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/compile/compiler.h"

namespace kcache {

// What a worker runs under. 0 / InfiniteDuration() mean "no limit".
struct WorkerLimits {
  int cpu_seconds = 0;        // CPU time of one job (ITIMER_PROF + RLIMIT_CPU, armed per job)
  uint64_t memory_bytes = 0;  // address space of the whole worker (RLIMIT_AS, set before exec)
  absl::Duration wall = absl::InfiniteDuration();  // wall time of one job, enforced here
};

struct WorkerLaunch {
  std::string binary;               // path of kcache-compile-worker
  std::string toolkit_root;         // the worker runs Toolkit::Load(toolkit_root)
  std::string expected_toolkit_id;  // the daemon's ToolkitIdentity::id; the worker must match
  WorkerLimits limits;
  // The worker's whole environment (it inherits nothing of ours): empty but for tests.
  std::vector<std::pair<std::string, std::string>> extra_env;
  absl::Duration startup_timeout = absl::Seconds(60);  // exec + toolkit load + hello
};

// How a worker's last job ended for the worker.
enum class WorkerFate {
  kAlive,        // still serving (the job succeeded or failed on its own terms)
  kTimedOut,     // killed here at the wall-clock limit
  kLimitKilled,  // stopped by its CPU-time or memory limit (or the kernel's OOM killer)
  kCrashed,      // died by another signal, exited, or broke the protocol
};

// Not thread-safe: one job at a time, from one thread (the pool hands a worker to one caller).
class WorkerProcess {
 public:
  // Starts a worker and waits for its hello. FailedPrecondition when the binary cannot be
  // executed, the worker cannot load the toolkit, or it reports another toolkit identity or
  // protocol version; Unavailable when it dies or stalls before its hello.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Start(const WorkerLaunch& launch);

  // Closes the socket (the worker exits when it reads EOF) and reaps the process, killing it
  // with SIGKILL when it has not exited within a second.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  // What the worker said of its sandbox (sandbox.h): whether Landlock and seccomp are in
  // force, and SandboxReport::Describe().
  bool sandboxed() const { return sandboxed_; }
  const std::string& sandbox() const { return sandbox_; }
  WorkerFate fate() const { return fate_; }
  // Whether the last job never reached the worker: it died (crashed, or killed from outside)
  // before it said it had read the job (CompileReply.taken). The job did not run, so it may
  // run in another worker: ProcessPool does, for a worker that died idle unnoticed.
  bool died_before_taking_job() const {
    return !took_job_ && (fate_ == WorkerFate::kCrashed ||
                          (fate_ == WorkerFate::kLimitKilled && killed_outside_));
  }
  // CPU time the last job used in the worker, as it reported it (0 when it died).
  uint64_t last_job_cpu_micros() const { return last_job_cpu_micros_; }

  // True while the process runs and can take a job. Reaps a worker that died while idle
  // (killed from outside): the pool then starts another instead of blaming the next job.
  bool Usable();

  // Runs one job. The Compiler's own errors (a compile error with its log, a bad option)
  // come back unchanged and the worker stays usable. When the worker dies or is killed,
  // fate() says why and the status explains it for the job's caller:
  //   DeadlineExceeded  "compile of K (id) for T ran past the 300 s wall-clock limit
  //                      (--compile-timeout-seconds); the worker was killed"
  //   ResourceExhausted the CPU-time limit (--compile-cpu-seconds) or the memory limit
  //                      (--compile-memory-max-bytes)
  //   Internal          "compile worker crashed (signal 11, SIGSEGV) while compiling K (id)
  //                      for T; the daemon keeps serving ..."
  absl::StatusOr<CompileOutput> Run(const CompileJob& job);

 private:
  WorkerProcess(pid_t pid, int fd, const WorkerLaunch& launch);
  absl::Status ReadHello();
  // After the socket failed with `io`: finds out what happened to the process (killing it
  // when it stalled), reaps it, sets fate_ and returns the status for `job`'s caller.
  absl::Status Fail(const CompileJob& job, const absl::Status& io);
  absl::Status ExplainExit(const CompileJob& job, int wait_status);
  // Reaps the process, waiting at most `grace`; then kills it and reaps it. The wait status.
  int Reap(absl::Duration grace);
  void KillAndReap();

  pid_t pid_;
  int fd_;
  const WorkerLaunch launch_;
  WorkerFate fate_ = WorkerFate::kAlive;
  bool reaped_ = false;
  bool killed_here_ = false;     // we sent it SIGKILL (a SIGKILL from elsewhere: the OOM killer)
  bool killed_outside_ = false;  // a SIGKILL not ours ended it
  bool took_job_ = false;        // the worker said it read the last job (CompileReply.taken)
  uint64_t last_job_cpu_micros_ = 0;
  bool sandboxed_ = false;
  std::string sandbox_;
};

}  // namespace kcache

#endif  // KCACHE_ENGINE_WORKERS_WORKER_PROCESS_H_
