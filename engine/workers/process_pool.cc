#include "engine/workers/process_pool.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/compile/toolkit.h"
#include "engine/workers/worker_process.h"
#include "spdlog/spdlog.h"

namespace kcache {
namespace {

constexpr char kWorkerName[] = "kcache-compile-worker";

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerReservesAddressSpace = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerReservesAddressSpace = true;
#else
constexpr bool kSanitizerReservesAddressSpace = false;
#endif
#else
constexpr bool kSanitizerReservesAddressSpace = false;
#endif

class ProcessPool final : public ProcessPoolCompiler {
 public:
  ProcessPool(std::shared_ptr<const Toolkit> toolkit, WorkerLaunch launch, int workers)
      : toolkit_(std::move(toolkit)), launch_(std::move(launch)), slots_(workers) {}

  // Starts the first worker, so that a broken setup is reported before any compile.
  absl::Status StartFirstWorker() {
    absl::StatusOr<std::unique_ptr<WorkerProcess>> worker = WorkerProcess::Start(launch_);
    if (!worker.ok()) return worker.status();
    sandboxed_ = (*worker)->sandboxed();
    sandbox_ = (*worker)->sandbox();
    absl::MutexLock lock(&mu_);
    slots_[0].pid = (*worker)->pid();
    slots_[0].worker = *std::move(worker);
    ++stats_.worker_starts;
    return absl::OkStatus();
  }

  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) override {
    // Options were validated at the edge (the front end); the worker's compiler checks them
    // again as defence. A target the toolkit lacks is refused before it reaches a process.
    if (absl::Status s = ValidateTarget(job.target, toolkit_->supported_archs(),
                                        toolkit_->identity().DisplayName());
        !s.ok()) {
      return s;
    }
    auto queued = std::chrono::steady_clock::now();
    size_t slot = Acquire();
    int64_t queued_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - queued)
                                .count();
    std::unique_ptr<WorkerProcess> worker = TakeUsableWorker(slot);
    if (worker == nullptr) {
      absl::StatusOr<std::unique_ptr<WorkerProcess>> started = WorkerProcess::Start(launch_);
      if (!started.ok()) {
        Release(slot, nullptr);
        return started.status();
      }
      worker = *std::move(started);
      absl::MutexLock lock(&mu_);
      slots_[slot].pid = worker->pid();
      ++stats_.worker_starts;
    }
    absl::StatusOr<CompileOutput> output = worker->Run(job);
    if (output.ok()) output->queued_micros = queued_micros;
    Count(worker->fate(), worker->last_job_cpu_micros());
    if (worker->fate() == WorkerFate::kTimedOut || worker->fate() == WorkerFate::kLimitKilled) {
      // One line per compile a limit ended: what, for which target, and which limit.
      spdlog::warn("compile stopped by a limit: {}", std::string(output.status().message()));
    }
    if (worker->fate() != WorkerFate::kAlive) worker.reset();  // replaced at the next compile
    Release(slot, std::move(worker));
    return output;
  }

  const Toolkit& toolkit() const override { return *toolkit_; }
  bool sandboxed() const override { return sandboxed_; }
  const std::string& sandbox() const override { return sandbox_; }

  ProcessPoolStats stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

  std::vector<pid_t> worker_pids() const override {
    absl::MutexLock lock(&mu_);
    std::vector<pid_t> pids;
    for (const Slot& slot : slots_) {
      if (slot.pid != 0) pids.push_back(slot.pid);
    }
    return pids;
  }

 private:
  // One place for a worker. While `busy`, the calling thread that took it owns `worker`
  // (moved out of the slot); `pid` stays readable for worker_pids().
  struct Slot {
    std::unique_ptr<WorkerProcess> worker;
    bool busy = false;
    pid_t pid = 0;
  };

  bool HasFreeSlot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const Slot& slot : slots_) {
      if (!slot.busy) return true;
    }
    return false;
  }

  // Waits for a free slot, preferring one that holds a worker, and marks it busy.
  size_t Acquire() {
    mu_.LockWhen(absl::Condition(this, &ProcessPool::HasFreeSlot));
    size_t chosen = slots_.size();
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].busy) continue;
      if (chosen == slots_.size()) chosen = i;
      if (slots_[i].worker != nullptr) {
        chosen = i;
        break;
      }
    }
    slots_[chosen].busy = true;
    ++stats_.compiles;
    mu_.Unlock();
    return chosen;
  }

  // The slot's worker if it is still running; null when there is none or it died idle.
  std::unique_ptr<WorkerProcess> TakeUsableWorker(size_t slot) {
    std::unique_ptr<WorkerProcess> worker;
    {
      absl::MutexLock lock(&mu_);
      worker = std::move(slots_[slot].worker);
    }
    if (worker != nullptr && !worker->Usable()) {
      worker.reset();
      absl::MutexLock lock(&mu_);
      slots_[slot].pid = 0;
      ++stats_.crashes;
    }
    return worker;
  }

  void Release(size_t slot, std::unique_ptr<WorkerProcess> worker) {
    absl::MutexLock lock(&mu_);
    slots_[slot].pid = worker != nullptr ? worker->pid() : 0;
    slots_[slot].worker = std::move(worker);
    slots_[slot].busy = false;
  }

  void Count(WorkerFate fate, uint64_t cpu_micros) {
    absl::MutexLock lock(&mu_);
    stats_.cpu_micros += cpu_micros;
    switch (fate) {
      case WorkerFate::kAlive:
        break;
      case WorkerFate::kTimedOut:
        ++stats_.timeouts;
        break;
      case WorkerFate::kLimitKilled:
        ++stats_.limit_kills;
        break;
      case WorkerFate::kCrashed:
        ++stats_.crashes;
        break;
    }
  }

  const std::shared_ptr<const Toolkit> toolkit_;
  const WorkerLaunch launch_;
  bool sandboxed_ = false;  // set once, before the pool is shared
  std::string sandbox_;
  mutable absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  ProcessPoolStats stats_ ABSL_GUARDED_BY(mu_);
};

bool IsExecutableFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string DefaultCompileWorkerPath() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string beside = ec ? std::string(kWorkerName) : (self.parent_path() / kWorkerName).string();
  if (IsExecutableFile(beside)) return beside;
#ifdef KCACHE_COMPILE_WORKER_BUILD_PATH
  if (IsExecutableFile(KCACHE_COMPILE_WORKER_BUILD_PATH)) return KCACHE_COMPILE_WORKER_BUILD_PATH;
#endif
  return beside;
}

absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> NewProcessPoolCompiler(
    std::shared_ptr<const Toolkit> toolkit, ProcessPoolOptions options) {
  WorkerLaunch launch;
  launch.binary =
      options.worker_binary.empty() ? DefaultCompileWorkerPath() : options.worker_binary;
  if (!IsExecutableFile(launch.binary)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the compile worker ", launch.binary, " is missing or not executable (",
        access(launch.binary.c_str(), X_OK) == 0 ? "not a file" : strerror(errno),
        "); install kcache-compile-worker next to kcached or pass --compile-worker PATH"));
  }
  launch.toolkit_root = toolkit->root();
  launch.expected_toolkit_id = toolkit->identity().id;
  launch.limits.cpu_seconds = std::max(0, options.cpu_seconds_per_compile);
  launch.limits.memory_bytes = kSanitizerReservesAddressSpace ? 0 : options.memory_bytes_per_worker;
  launch.limits.wall = options.wall_time_per_compile > absl::ZeroDuration()
                           ? options.wall_time_per_compile
                           : absl::InfiniteDuration();
  launch.extra_env = std::move(options.extra_env);
  int workers = options.workers > 0
                    ? options.workers
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  auto pool = std::make_unique<ProcessPool>(std::move(toolkit), std::move(launch), workers);
  if (absl::Status s = pool->StartFirstWorker(); !s.ok()) return s;
  return pool;
}

}  // namespace kcache
