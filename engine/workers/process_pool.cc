#include "engine/workers/process_pool.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/compile/toolkit.h"
#include "engine/workers/turn_order.h"
#include "engine/workers/worker_process.h"
#include "engine/workers/worker_protocol.h"
#include "spdlog/spdlog.h"

namespace kcache {
namespace {

constexpr char kWorkerName[] = "kcache-compile-worker";

// How often a queued job asks whether anyone still wants it.
constexpr absl::Duration kWantedCheckEvery = absl::Milliseconds(100);
// Clients whose last turn the queue remembers (names are the clients' own: bounded).
constexpr size_t kMaxClientsRemembered = 4096;

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
  ProcessPool(std::shared_ptr<const Toolkit> toolkit, WorkerLaunch launch, int workers,
              absl::Duration reserve_after)
      : toolkit_(std::move(toolkit)),
        launch_(std::move(launch)),
        workers_(workers),
        reserve_after_(reserve_after),
        slots_(workers + 1) {}  // the last: the reserve (see FreeSlotFor)

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
    std::optional<size_t> acquired = Acquire(job);
    if (!acquired) {
      return absl::CancelledError(absl::StrCat("compile of ", DescribeJob(job),
                                               " left the queue: nobody waits for it any more"));
    }
    size_t slot = *acquired;
    int64_t queued_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - queued)
                                .count();
    std::unique_ptr<WorkerProcess> worker = TakeUsableWorker(slot);
    // A worker that sat idle may die (killed, out of memory) just before it takes the job, too
    // late for TakeUsableWorker to see: the job never ran, and goes to a new worker, once (a
    // new worker that dies too is a failure to report).
    bool may_retry = worker != nullptr;
    absl::StatusOr<CompileOutput> output;
    for (;;) {
      if (worker == nullptr) {
        absl::StatusOr<std::unique_ptr<WorkerProcess>> started = StartWorkerIn(slot);
        if (!started.ok()) {
          Release(slot, nullptr);
          return started.status();
        }
        worker = *std::move(started);
      }
      output = worker->Run(job);
      if (!may_retry || !worker->died_before_taking_job()) break;
      may_retry = false;
      spdlog::info(
          "the compile worker that had been idle died as it was given {} ({}); the job "
          "goes to a new worker",
          DescribeJob(job), std::string(output.status().message()));
      worker.reset();
      DiedIdle(slot);
    }
    if (output.ok()) {
      output->queued_micros = queued_micros;
      output->cpu_micros = static_cast<int64_t>(worker->last_job_cpu_micros());
    }
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
    std::string client;  // whose compile runs in it, while busy
    absl::Time busy_since;
  };

  // One caller waiting for a slot.
  struct Waiter {
    std::string client;
    uint64_t arrival = 0;
    CompileStatus* status = nullptr;  // the job's (CompileDemand::status), or null
  };

  // The slot `w` would take now, or -1. A free regular slot, preferring one whose worker is
  // running. Else the reserve: one worker beyond --compile-workers, opened only for a client
  // with nothing running while every regular slot has run one compile for reserve_after_ or
  // more (bombs, most likely), so that such a client waits at most that long.
  int FreeSlotFor(const Waiter* w) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int free = -1;
    absl::Time long_ago = absl::Now() - reserve_after_;
    bool all_long = true;
    for (int i = 0; i < workers_; ++i) {
      const Slot& slot = slots_[i];
      if (slot.busy) {
        all_long = all_long && slot.busy_since <= long_ago;
        continue;
      }
      if (free < 0 || (slots_[free].worker == nullptr && slot.worker != nullptr)) free = i;
    }
    if (free >= 0) return free;
    if (all_long && !slots_[workers_].busy && RunningFor(w->client) == 0) return workers_;
    return -1;
  }

  int RunningFor(const std::string& client) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto found = running_.find(client);
    return found == running_.end() ? 0 : found->second;
  }

  // When `client` last got a slot (0: not lately).
  uint64_t LastServed(const std::string& client) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto found = last_served_.find(client);
    return found == last_served_.end() ? 0 : found->second;
  }

  // The waiter a free slot goes to (docs/compile-workers.md, "Queueing"): the first in turn
  // order, which Reorder keeps.
  const Waiter* Next() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiting_.empty() ? nullptr : waiting_.front();
  }

  // Puts the waiters in turn order (TurnOrder) and tells each where it is: behind the
  // compiles running and those ahead of it. Called whenever the queue or a client's running
  // count changes.
  void Reorder() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<WaitingTurn> turns;
    turns.reserve(waiting_.size());
    for (const Waiter* w : waiting_) turns.push_back({&w->client, w->arrival});
    std::vector<size_t> order = TurnOrder(
        turns,
        [this](const std::string& client) {
          return ClientTurns{RunningFor(client), LastServed(client)};
        },
        std::max(1, workers_ - 1), starts_);
    uint32_t running = 0;
    for (const Slot& slot : slots_) running += slot.busy ? 1 : 0;
    std::vector<const Waiter*> ordered;
    ordered.reserve(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      const Waiter* w = waiting_[order[i]];
      ordered.push_back(w);
      if (w->status != nullptr) w->status->Queued(running + static_cast<uint32_t>(i));
    }
    waiting_ = std::move(ordered);
  }

  void AddWaiter(const Waiter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    waiting_.push_back(w);
    Reorder();
  }
  // The caller Reorders, once it has also moved the client's counts (a waiter that got a slot).
  void RemoveWaiter(const Waiter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), w));
  }

  struct Turn {
    ProcessPool* pool;
    const Waiter* waiter;
  };
  static bool IsTurn(Turn* turn) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // called with mu_ held
    return turn->pool->Next() == turn->waiter && turn->pool->FreeSlotFor(turn->waiter) >= 0;
  }

  // Waits for this job's turn at a free slot (preferring one that holds a worker) and marks it
  // busy. Nullopt when, while it waited, nobody wanted the job any more (job.demand.wanted).
  std::optional<size_t> Acquire(const CompileJob& job) {
    Waiter me{job.demand.client, 0, job.demand.status.get()};
    Turn turn{this, &me};
    absl::MutexLock lock(&mu_);
    me.arrival = ++arrivals_;
    AddWaiter(&me);
    while (!mu_.AwaitWithTimeout(absl::Condition(&IsTurn, &turn), kWantedCheckEvery)) {
      if (job.demand.wanted && !job.demand.wanted()) {
        RemoveWaiter(&me);
        Reorder();
        ++stats_.dropped;
        return std::nullopt;
      }
    }
    RemoveWaiter(&me);
    size_t chosen = FreeSlotFor(&me);
    if (static_cast<int>(chosen) == workers_) ++stats_.reserve_compiles;
    slots_[chosen].busy = true;
    slots_[chosen].busy_since = absl::Now();
    slots_[chosen].client = me.client;
    ++running_[me.client];
    if (last_served_.size() >= kMaxClientsRemembered) last_served_.clear();  // forget, not grow
    last_served_[me.client] = ++starts_;
    ++stats_.compiles;
    Reorder();
    if (me.status != nullptr) me.status->Compiling();
    return chosen;
  }

  // A new worker for `slot` (busy: owned by the caller until Release).
  absl::StatusOr<std::unique_ptr<WorkerProcess>> StartWorkerIn(size_t slot) {
    absl::StatusOr<std::unique_ptr<WorkerProcess>> started = WorkerProcess::Start(launch_);
    if (!started.ok()) return started;
    absl::MutexLock lock(&mu_);
    slots_[slot].pid = (*started)->pid();
    ++stats_.worker_starts;
    return started;
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
      DiedIdle(slot);
    }
    return worker;
  }

  // The slot's worker died while idle (a crash, as the pool counts it); the slot has none.
  void DiedIdle(size_t slot) {
    absl::MutexLock lock(&mu_);
    slots_[slot].pid = 0;
    ++stats_.crashes;
  }

  void Release(size_t slot, std::unique_ptr<WorkerProcess> worker) {
    if (static_cast<int>(slot) == workers_) worker.reset();  // the reserve keeps no worker
    absl::MutexLock lock(&mu_);
    slots_[slot].pid = worker != nullptr ? worker->pid() : 0;
    slots_[slot].worker = std::move(worker);
    slots_[slot].busy = false;
    if (--running_[slots_[slot].client] == 0) running_.erase(slots_[slot].client);
    Reorder();
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
  const int workers_;  // regular slots; slots_ has one more, the reserve
  const absl::Duration reserve_after_;
  bool sandboxed_ = false;  // set once, before the pool is shared
  std::string sandbox_;
  mutable absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  // In turn order, as Reorder left it (a waiter just added or removed: until the next Reorder).
  std::vector<const Waiter*> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> running_ ABSL_GUARDED_BY(mu_);  // compiles per client
  absl::flat_hash_map<std::string, uint64_t> last_served_ ABSL_GUARDED_BY(mu_);  // by starts_
  uint64_t arrivals_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t starts_ ABSL_GUARDED_BY(mu_) = 0;
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
  auto pool = std::make_unique<ProcessPool>(std::move(toolkit), std::move(launch), workers,
                                            options.reserve_after);
  if (absl::Status s = pool->StartFirstWorker(); !s.ok()) return s;
  return pool;
}

}  // namespace kcache
