// A Compiler that runs every compile in a pool of long-lived worker processes
// (kcache-compile-worker, docs/compile-workers.md), each with NVRTC loaded once, under limits
// on CPU time and memory per worker and wall time per compile. A compiler crash, a runaway
// template or an out-of-memory compile fails that one request with a clear status and the
// daemon keeps serving; the dead worker is replaced by a fresh one for the next compile.
#ifndef KCACHE_ENGINE_WORKERS_PROCESS_POOL_H_
#define KCACHE_ENGINE_WORKERS_PROCESS_POOL_H_

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

// Each setting names the kcached flag that sets it; the error messages cite the same flags.
struct ProcessPoolOptions {
  // --compile-worker: path of the worker executable. Empty: DefaultCompileWorkerPath().
  std::string worker_binary;
  // --compile-workers: worker processes, which is how many compiles run at once; more
  // callers wait their turn. 0: one per core. One more (the reserve) starts only for a client
  // with nothing running when every worker has been busy `reserve_after` or more
  // (docs/compile-workers.md, "Queueing").
  int workers = 0;
  absl::Duration reserve_after = absl::Seconds(10);
  // --compile-cpu-seconds: CPU seconds one compile may use before its worker is stopped
  // (SIGPROF). 0: no limit.
  int cpu_seconds_per_compile = 120;
  // --compile-memory-max-bytes: address space of each worker (RLIMIT_AS), NVRTC and its libraries
  // included; an idle worker maps ~230 MB. 0: no limit. Not applied in AddressSanitizer and
  // ThreadSanitizer builds (they reserve terabytes of address space).
  uint64_t memory_bytes_per_worker = uint64_t{4} << 30;
  // --compile-timeout-seconds: wall-clock time one compile may take before its worker is
  // killed with SIGKILL. Zero, negative or InfiniteDuration(): no limit.
  absl::Duration wall_time_per_compile = absl::Seconds(300);
  // The workers' whole environment (they inherit nothing of the caller's). Tests.
  std::vector<std::pair<std::string, std::string>> extra_env;
};

// Counters since the pool started. Monotonic.
struct ProcessPoolStats {
  uint64_t compiles = 0;          // jobs past the option/target checks, whatever their outcome
  uint64_t worker_starts = 0;     // workers started, the first one included
  uint64_t timeouts = 0;          // workers killed at the wall-clock limit
  uint64_t limit_kills = 0;       // workers stopped by the CPU-time or memory limit
  uint64_t crashes = 0;           // workers that died any other way (a signal, an exit)
  uint64_t cpu_micros = 0;        // CPU time compiles used in the workers (as they reported it)
  uint64_t dropped = 0;           // jobs that left the queue because nobody wanted them any more
  uint64_t reserve_compiles = 0;  // compiles run in the reserve worker (every worker was long busy)
};

class ProcessPoolCompiler : public Compiler {
 public:
  // Compile (thread-safe) returns what the in-process NVRTC compiler would, byte for byte,
  // its compile errors (Aborted + kCompileLogPayload) included. In addition:
  //   DeadlineExceeded   the compile ran past wall_time_per_compile; its worker was killed
  //   ResourceExhausted  it ran past cpu_seconds_per_compile or out of memory
  //   Internal           the worker crashed ("compile worker crashed (signal 11, SIGSEGV)
  //                      while compiling K (id) for T; the daemon keeps serving ...")
  //   FailedPrecondition / Unavailable  no worker could be started for it
  //   Cancelled          it waited for a worker and nobody wanted it any more
  //                      (job.demand.wanted), so it left the queue without compiling
  // Only that request fails; the next compile gets a new worker. Waiting jobs get free workers
  // fairly across job.demand.client (docs/compile-workers.md, "Queueing").
  //
  // toolkit() is the daemon's own load of the same toolkit; every worker reports the same
  // identity (checked when it starts).
  //
  // Destroy only when no Compile is running: closes every worker's socket and reaps it.

  virtual ProcessPoolStats stats() const = 0;
  // What the first worker said of its sandbox (engine/workers/sandbox.h): true when Landlock
  // and seccomp are in force, and SandboxReport::Describe(), e.g. "Landlock ABI 7 (reads only
  // /usr/local/cuda-13.0), seccomp (...), user, network and IPC namespaces, empty
  // environment" or "NOT sandboxed ...; missing: no Landlock (...)". Every worker runs the same
  // binary on the same kernel, so the first speaks for all.
  virtual bool sandboxed() const = 0;
  virtual const std::string& sandbox() const = 0;
  // Process ids of the workers running now (started lazily: fewer than `workers` at first).
  virtual std::vector<pid_t> worker_pids() const = 0;
};

// The worker next to this executable (/proc/self/exe's folder)/kcache-compile-worker when
// it exists there, else the one in the build tree this library was built in, else the
// next-to-the-executable path (which NewProcessPoolCompiler then reports as missing).
std::string DefaultCompileWorkerPath();

// Starts the pool with one worker (the rest start on demand), so that a missing or broken
// worker binary or a toolkit the workers cannot load is reported here: FailedPrecondition
// naming the path and what to do. `toolkit` is the daemon's loaded toolkit; the workers load
// the same root.
absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> NewProcessPoolCompiler(
    std::shared_ptr<const Toolkit> toolkit, ProcessPoolOptions options);

}  // namespace kcache

#endif  // KCACHE_ENGINE_WORKERS_PROCESS_POOL_H_
