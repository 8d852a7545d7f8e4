// The compile process pool with real workers and real NVRTC: same bytes as the in-process
// compiler, concurrency, and a crash, a hang, a CPU-time and a memory overrun each failing
// only their own request. The faulty worker (KCACHE_WORKER_FAULT_INJECTION) crashes on
// KCACHE_TEST_CRASH and spins on KCACHE_TEST_HANG; the production worker has no such code.
#include "engine/workers/process_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/cubin.h"
#include "core/manifest.h"
#include "engine/compile/compile_status.h"
#include "engine/compile/toolkit.h"
#include "engine/fatbin/ptx_sass.h"
#include "gtest/gtest.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/toolkit.h"
#include "tests/testutil/tree_paths.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

std::string Worker() { return testing::BinaryPath("engine/workers/kcache-compile-worker"); }
std::string FaultyWorker() {
  return testing::BinaryPath("engine/workers/kcache-compile-worker-faulty");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kMemoryLimitApplies = false;  // the pool leaves RLIMIT_AS off under sanitizers
#else
constexpr bool kMemoryLimitApplies = true;
#endif

CompileJob Job(KernelSpec spec, const std::string& target) {
  CompileJob job;
  job.spec = std::move(spec);
  job.id = ComputeKernelId(job.spec);
  absl::StatusOr<Target> t = ParseTarget(target);
  EXPECT_TRUE(t.ok()) << t.status();
  job.target = *t;
  return job;
}

KernelSpec Saxpy() {
  KernelSpec spec;
  spec.name = "saxpy";
  spec.source = testing::kSaxpySource;
  return spec;
}

KernelSpec ScaleTemplate() {
  KernelSpec spec;
  spec.name = "scale";
  spec.source = testing::kScaleTemplateSource;
  spec.headers["scale.cuh"] = testing::kScaleHeader;
  spec.options = {"-std=c++17"};
  spec.name_expressions = {"scale<float>", "scale<double>"};
  return spec;
}

// Saxpy with a marker comment the faulty worker reacts to.
KernelSpec Faulty(const std::string& marker) {
  KernelSpec spec = Saxpy();
  spec.name = absl::StrCat("saxpy_", marker);
  spec.source = absl::StrCat("// ", marker, "\n", spec.source);
  return spec;
}

// The CUB-heavy MoE routing kernel of the bundled manifest: ~3-5 s of NVRTC per target.
KernelSpec MoeRouting() {
  absl::StatusOr<Manifest> manifest = LoadManifest(testing::SourcePath("kernels/manifest.yaml"));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  const ManifestKernel* kernel = manifest.ok() ? manifest->Find("moe_routing") : nullptr;
  EXPECT_NE(kernel, nullptr);
  return kernel != nullptr ? kernel->record.spec : KernelSpec{};
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class ProcessPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::shared_ptr<const Toolkit>>& toolkit =
        ::kcache::testing::SharedToolkit();
    ASSERT_TRUE(toolkit.ok()) << toolkit.status();
    toolkit_ = *toolkit;
  }

  static ProcessPoolOptions Options(const std::string& worker, int workers) {
    ProcessPoolOptions options;
    options.worker_binary = worker;
    options.workers = workers;
    return options;
  }
  std::unique_ptr<ProcessPoolCompiler> Pool(ProcessPoolOptions options) {
    absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> pool =
        NewProcessPoolCompiler(toolkit_, std::move(options));
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }
  // The pool still compiles after a failure.
  static void ExpectServes(Compiler& pool) {
    absl::StatusOr<CompileOutput> out = pool.Compile(Job(Saxpy(), "sm_89"));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->artifacts.size(), 2u);
  }

  std::shared_ptr<const Toolkit> toolkit_;
};

// Runs the scope in an empty working folder that no longer exists, as a sandboxed worker
// compiles (LTO-IR records the working folder; where there is none, it records the same thing
// in every worker), and comes back.
class InDeletedWorkingFolder {
 public:
  InDeletedWorkingFolder() : previous_(open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) {
    char folder[] = "/tmp/kcache-test-cwd-XXXXXX";
    EXPECT_NE(mkdtemp(folder), nullptr);
    EXPECT_EQ(chdir(folder), 0);
    EXPECT_EQ(rmdir(folder), 0);
  }
  ~InDeletedWorkingFolder() {
    EXPECT_EQ(fchdir(previous_), 0);
    close(previous_);
  }

 private:
  int previous_;
};

TEST_F(ProcessPoolTest, GivesTheSameArtifactsAsTheInProcessCompiler) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 1));
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->toolkit().identity().id, toolkit_->identity().id);
  std::unique_ptr<Compiler> local = NewNvrtcCompiler(toolkit_);
  CompileJob scale = Job(ScaleTemplate(), "sm_80");
  scale.want_ltoir = true;
  for (const CompileJob& job : {Job(Saxpy(), "sm_89"), Job(Saxpy(), "compute_90"), scale}) {
    absl::StatusOr<CompileOutput> remote = pool->Compile(job);
    absl::StatusOr<CompileOutput> here = [&] {
      InDeletedWorkingFolder empty;
      return local->Compile(job);
    }();
    ASSERT_TRUE(remote.ok()) << remote.status();
    ASSERT_TRUE(here.ok()) << here.status();
    ASSERT_EQ(remote->artifacts.size(), here->artifacts.size()) << job.target.ToString();
    size_t expected = (job.target.kind == TargetKind::kSass ? 2 : 1) + (job.want_ltoir ? 1 : 0);
    EXPECT_EQ(remote->artifacts.size(), expected);  // cubin, PTX, LTO-IR as asked
    for (size_t i = 0; i < here->artifacts.size(); ++i) {
      const Artifact& r = remote->artifacts[i];
      const Artifact& h = here->artifacts[i];
      EXPECT_EQ(r.meta.key, h.meta.key);
      EXPECT_TRUE(r.bytes == h.bytes) << r.meta.key.ToString() << " differs";
      EXPECT_EQ(r.meta.kernel_name, h.meta.kernel_name);
      EXPECT_EQ(r.meta.lowered_names, h.meta.lowered_names);
      EXPECT_EQ(r.meta.compile_log, h.meta.compile_log);
      EXPECT_EQ(r.meta.checksum, h.meta.checksum);
      EXPECT_EQ(r.meta.size, h.meta.size);
      EXPECT_EQ(r.meta.min_driver, h.meta.min_driver);
      EXPECT_GT(r.meta.compile_micros, 0u);
    }
  }
  EXPECT_EQ(pool->stats().compiles, 3u);
  EXPECT_EQ(pool->stats().worker_starts, 1u);  // one worker served all three
}

// A PTX job (CompileJob::ptx): the worker builds the cubin from the PTX with nvJitLink, the same
// bytes as in this process; PTX that does not compile is Aborted with nvJitLink's log; a target
// that is not SASS and options other than -O0..-O3 are refused before nvJitLink runs.
TEST_F(ProcessPoolTest, BuildsSassFromPtxAsTheInProcessCompilerDoes) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 1));
  ASSERT_NE(pool, nullptr);
  std::unique_ptr<Compiler> local = NewNvrtcCompiler(toolkit_);
  absl::StatusOr<CompileOutput> ptx = local->Compile(Job(Saxpy(), "compute_75"));
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  CompileJob job = Job(Saxpy(), "sm_86");
  job.spec = KernelSpec{};
  job.spec.name = "PTX of saxpy";
  job.spec.options = {"-O3"};
  job.ptx = ptx->artifacts[0].bytes;
  absl::StatusOr<CompileOutput> remote = pool->Compile(job);
  absl::StatusOr<CompileOutput> here = local->Compile(job);
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_TRUE(here.ok()) << here.status();
  ASSERT_EQ(remote->artifacts.size(), 1u);
  const Artifact& cubin = remote->artifacts[0];
  EXPECT_EQ(cubin.meta.key,
            (ArtifactKey{job.id, ArtifactKind::kCubin, job.target, toolkit_->identity().id, 0}));
  EXPECT_EQ(job.ExpectedKeys(toolkit_->identity().id), std::vector<ArtifactKey>{cubin.meta.key});
  ASSERT_TRUE(fatbin::IsPtxSassArtifact(cubin.meta));  // stored as warm --library stores it
  EXPECT_EQ(fatbin::PtxSassOriginOf(cubin.meta).library, "PTX of saxpy");
  EXPECT_EQ(fatbin::PtxSassOriginOf(cubin.meta).ptx.ToString(), "compute_75");
  EXPECT_TRUE(cubin.bytes == here->artifacts[0].bytes);
  absl::StatusOr<int> arch = CubinSmArch(cubin.bytes);
  ASSERT_TRUE(arch.ok()) << arch.status();
  EXPECT_EQ(*arch, 86);

  CompileJob broken = job;
  broken.ptx = ".version 9.0\n.target sm_75\n.address_size 64\n.visible .entry k() { bogus; }\n";
  absl::Status failed = pool->Compile(broken).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kAborted) << failed;
  EXPECT_FALSE(CompileLogOf(failed).empty()) << failed;
  CompileJob not_sass = job;
  not_sass.target = *ParseTarget("compute_86");
  EXPECT_EQ(pool->Compile(not_sass).status().code(), absl::StatusCode::kInvalidArgument);
  CompileJob bad_option = job;
  bad_option.spec.options = {"--output-file=/tmp/x"};
  absl::Status refused = pool->Compile(bad_option).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "--output-file=/tmp/x")) << refused;
  ExpectServes(*pool);  // the worker is still there
}

TEST_F(ProcessPoolTest, RunsEightConcurrentCompilesOnTwoWorkers) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 2));
  ASSERT_NE(pool, nullptr);
  const std::vector<std::string> targets = {"sm_75", "sm_80", "sm_86",  "sm_87",
                                            "sm_89", "sm_90", "sm_100", "sm_120"};
  std::vector<absl::StatusOr<CompileOutput>> results(targets.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = pool->Compile(Job(Saxpy(), targets[i])); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < targets.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << targets[i] << ": " << results[i].status();
    ASSERT_EQ(results[i]->artifacts.size(), 2u);
    EXPECT_EQ(results[i]->artifacts[0].meta.key.target.ToString(), targets[i]);
  }
  ProcessPoolStats stats = pool->stats();
  EXPECT_EQ(stats.compiles, 8u);
  EXPECT_EQ(stats.worker_starts, 2u);  // never more processes than workers
  EXPECT_EQ(stats.crashes + stats.timeouts + stats.limit_kills, 0u);
  EXPECT_GT(stats.cpu_micros, 8u * 10000);  // each compile took well over 10 ms of CPU
  EXPECT_EQ(pool->worker_pids().size(), 2u);
}

TEST_F(ProcessPoolTest, CompileErrorCarriesTheNvrtcLogAcrossTheProcessBoundary) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 1));
  ASSERT_NE(pool, nullptr);
  KernelSpec broken;
  broken.name = "broken";
  broken.source = testing::kSyntaxErrorSource;
  CompileJob job = Job(broken, "sm_86");
  absl::StatusOr<CompileOutput> remote = pool->Compile(job);
  absl::StatusOr<CompileOutput> here = NewNvrtcCompiler(toolkit_)->Compile(job);
  ASSERT_EQ(remote.status().code(), absl::StatusCode::kAborted) << remote.status();
  EXPECT_EQ(remote.status().message(), here.status().message());
  EXPECT_NE(CompileLogOf(remote.status()).find("undeclared_identifier"), std::string::npos)
      << remote.status();
  EXPECT_EQ(CompileLogOf(remote.status()), CompileLogOf(here.status()));
  EXPECT_EQ(pool->stats().crashes, 0u);  // a compile error is not a worker failure
  EXPECT_EQ(pool->stats().worker_starts, 1u);
}

TEST_F(ProcessPoolTest, UnsupportedTargetsNeverReachAWorkerAndTheWorkerRefusesBadOptions) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 1));
  ASSERT_NE(pool, nullptr);
  absl::Status old = pool->Compile(Job(Saxpy(), "sm_70")).status();
  EXPECT_EQ(old.code(), absl::StatusCode::kInvalidArgument) << old;
  EXPECT_NE(old.message().find("supported"), absl::string_view::npos) << old;
  EXPECT_EQ(pool->stats().compiles, 0u);
  // Options are validated once, at the edge (the daemon's front end); the worker checks again
  // as defence, with the same function, and refuses a file-writing option.
  KernelSpec writes_file = Saxpy();
  writes_file.options = {"-fdevice-time-trace=/tmp/x.json"};
  absl::Status refused = pool->Compile(Job(writes_file, "sm_86")).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("-fdevice-time-trace"), absl::string_view::npos) << refused;
  EXPECT_FALSE(std::filesystem::exists("/tmp/x.json"));
}

TEST_F(ProcessPoolTest, CrashFailsOnlyThatCompileAndTheNextOneGetsANewWorker) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(FaultyWorker(), 1));
  ASSERT_NE(pool, nullptr);
  ASSERT_EQ(pool->worker_pids().size(), 1u);
  pid_t first = pool->worker_pids()[0];

  absl::Status crash = pool->Compile(Job(Faulty("KCACHE_TEST_CRASH"), "sm_86")).status();
  EXPECT_EQ(crash.code(), absl::StatusCode::kInternal) << crash;
  EXPECT_NE(crash.message().find("compile worker crashed (signal 11, SIGSEGV) while compiling "
                                 "saxpy_KCACHE_TEST_CRASH"),
            absl::string_view::npos)
      << crash;
  EXPECT_NE(crash.message().find("for sm_86"), absl::string_view::npos) << crash;
  EXPECT_NE(crash.message().find("the daemon keeps serving"), absl::string_view::npos) << crash;
  EXPECT_TRUE(pool->worker_pids().empty());  // the dead one is gone, the next starts on demand

  ExpectServes(*pool);
  ASSERT_EQ(pool->worker_pids().size(), 1u);
  EXPECT_NE(pool->worker_pids()[0], first);
  EXPECT_EQ(pool->stats().crashes, 1u);
  EXPECT_EQ(pool->stats().worker_starts, 2u);
}

// A worker whose socket closed but that did not exit is killed by the pool, and the message
// says so (it blamed the kernel's OOM killer for the pool's own SIGKILL).
TEST_F(ProcessPoolTest, WorkerThatClosedItsSocketButStaysIsKilledAndNotBlamedOnTheOomKiller) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(FaultyWorker(), 1));
  ASSERT_NE(pool, nullptr);
  pid_t stuck = pool->worker_pids().at(0);
  absl::Status status = pool->Compile(Job(Faulty("KCACHE_TEST_CLOSE_AND_STOP"), "sm_89")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("closed its socket"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("kcached killed it"), absl::string_view::npos) << status;
  EXPECT_EQ(status.message().find("out-of-memory"), absl::string_view::npos) << status;
  EXPECT_EQ(kill(stuck, 0), -1);
  EXPECT_EQ(pool->stats().crashes, 1u);
  EXPECT_EQ(pool->stats().limit_kills, 0u);
  ExpectServes(*pool);
}

TEST_F(ProcessPoolTest, HangIsKilledAtTheWallClockLimit) {
  ProcessPoolOptions options = Options(FaultyWorker(), 1);
  options.wall_time_per_compile = absl::Seconds(1);
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(options);
  ASSERT_NE(pool, nullptr);
  pid_t hung = pool->worker_pids().at(0);
  auto start = std::chrono::steady_clock::now();
  absl::Status hang = pool->Compile(Job(Faulty("KCACHE_TEST_HANG"), "sm_89")).status();
  double seconds = SecondsSince(start);
  EXPECT_EQ(hang.code(), absl::StatusCode::kDeadlineExceeded) << hang;
  EXPECT_NE(hang.message().find("compile of saxpy_KCACHE_TEST_HANG ("), absl::string_view::npos)
      << hang;
  EXPECT_NE(hang.message().find(") for sm_89 ran past the 1 s wall-clock limit "
                                "(--compile-timeout-seconds); the worker was killed"),
            absl::string_view::npos)
      << hang;
  EXPECT_GE(seconds, 1.0);
  EXPECT_LT(seconds, 2.5);
  EXPECT_EQ(kill(hung, 0), -1);  // really gone (and reaped: not even a zombie)
  EXPECT_EQ(pool->stats().timeouts, 1u);
  ExpectServes(*pool);
}

TEST_F(ProcessPoolTest, HeavyCompilePastTheCpuLimitIsResourceExhausted) {
  ProcessPoolOptions options = Options(Worker(), 1);
  options.cpu_seconds_per_compile = 1;
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(options);
  ASSERT_NE(pool, nullptr);
  absl::Status status = pool->Compile(Job(MoeRouting(), "sm_90")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("ran past the 1 s CPU-time limit (--compile-cpu-seconds)"),
            absl::string_view::npos)
      << status;
  EXPECT_EQ(pool->stats().limit_kills, 1u);
  ExpectServes(*pool);
}

TEST_F(ProcessPoolTest, HeavyCompilePastTheMemoryLimitIsResourceExhausted) {
  if (!kMemoryLimitApplies) GTEST_SKIP() << "no RLIMIT_AS under sanitizers";
  ProcessPoolOptions options = Options(Worker(), 1);
  options.memory_bytes_per_worker = uint64_t{300} << 20;
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(options);
  ASSERT_NE(pool, nullptr);
  absl::Status status = pool->Compile(Job(MoeRouting(), "sm_90")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("compile of moe_routing ("), absl::string_view::npos) << status;
  EXPECT_NE(
      status.message().find(
          ") for sm_90 ran out of memory under the 300 MiB limit (--compile-memory-max-bytes)"),
      absl::string_view::npos)
      << status;
  ExpectServes(*pool);
}

TEST_F(ProcessPoolTest, MemoryLimitTooLowToLoadTheToolkitIsReportedAtStart) {
  if (!kMemoryLimitApplies) GTEST_SKIP() << "no RLIMIT_AS under sanitizers";
  ProcessPoolOptions options = Options(Worker(), 1);
  options.memory_bytes_per_worker = uint64_t{100} << 20;
  absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> pool =
      NewProcessPoolCompiler(toolkit_, options);
  ASSERT_EQ(pool.status().code(), absl::StatusCode::kFailedPrecondition) << pool.status();
  EXPECT_NE(pool.status().message().find("could not load the toolkit under its 100 MiB memory "
                                         "limit (--compile-memory-max-bytes"),
            absl::string_view::npos)
      << pool.status();
}

TEST_F(ProcessPoolTest, WorkerKilledWhileIdleIsReplacedWithoutFailingTheNextCompile) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 1));
  ASSERT_NE(pool, nullptr);
  pid_t first = pool->worker_pids().at(0);
  ASSERT_EQ(kill(first, SIGKILL), 0);
  // Dead before the next compile: waitable by its parent (this process, the pool's), without
  // reaping it (WNOWAIT: the pool reaps it). A leader shown as a zombie in /proc is not enough:
  // its other threads (ASan's) may still be exiting, and until they are waitpid sees nothing.
  ASSERT_TRUE(::kcache::testing::WaitFor([first] {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(first), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == first;
  }));
  ExpectServes(*pool);
  EXPECT_NE(pool->worker_pids().at(0), first);
}

TEST_F(ProcessPoolTest, AJobWhoseIdleWorkerDiesAsItIsHandedOverRunsInANewWorker) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 1));
  ASSERT_NE(pool, nullptr);
  pid_t first = pool->worker_pids().at(0);
  // Stopped, the worker is alive when the pool hands it the job, and cannot read it; killed
  // then, it dies before it took the job, as an idle worker the OOM killer picks does.
  ASSERT_EQ(kill(first, SIGSTOP), 0);
  absl::StatusOr<CompileOutput> out = absl::UnknownError("not run");
  std::thread compile([&] { out = pool->Compile(Job(Saxpy(), "sm_89")); });
  EXPECT_TRUE(::kcache::testing::WaitFor([&] { return pool->stats().compiles == 1; }));
  // The job on its way to the stopped worker; had the kill come first and the pool seen it,
  // the answer must be the same.
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_EQ(kill(first, SIGKILL), 0);
  compile.join();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->artifacts.size(), 2u);
  EXPECT_NE(pool->worker_pids().at(0), first);
  EXPECT_EQ(pool->stats().compiles, 1u);
}

TEST_F(ProcessPoolTest, MissingWorkerBinaryIsFailedPreconditionNamingThePath) {
  absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> pool =
      NewProcessPoolCompiler(toolkit_, Options("/nonexistent/kcache-compile-worker", 1));
  ASSERT_EQ(pool.status().code(), absl::StatusCode::kFailedPrecondition) << pool.status();
  EXPECT_NE(pool.status().message().find("/nonexistent/kcache-compile-worker"),
            absl::string_view::npos);
  EXPECT_NE(pool.status().message().find("--compile-worker"), absl::string_view::npos);
}

TEST_F(ProcessPoolTest, WorkerThatCannotStartIsReportedWithItsExit) {
  testing::TempDir dir;
  std::string not_a_program = dir.Write("not-a-program", "just text\n");
  chmod(not_a_program.c_str(), 0755);
  absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> pool =
      NewProcessPoolCompiler(toolkit_, Options(not_a_program.c_str(), 1));
  ASSERT_EQ(pool.status().code(), absl::StatusCode::kFailedPrecondition) << pool.status();
  EXPECT_NE(pool.status().message().find("could not execute the compile worker " + not_a_program),
            absl::string_view::npos)
      << pool.status();

  // A "worker" that exits at once, with a code that shows extra_env reached it.
  std::string quits =
      dir.Write("quits", "#!/bin/sh\n[ \"$KCACHE_TEST_VAR\" = yes ] && exit 7\nexit 3\n");
  chmod(quits.c_str(), 0755);
  ProcessPoolOptions options = Options(quits.c_str(), 1);
  options.extra_env = {{"KCACHE_TEST_VAR", "yes"}};
  pool = NewProcessPoolCompiler(toolkit_, options);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kUnavailable) << pool.status();
  EXPECT_NE(pool.status().message().find("stopped before it was ready (exit status 7"),
            absl::string_view::npos)
      << pool.status();
}

TEST_F(ProcessPoolTest, DestroyingThePoolEndsEveryWorker) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 2));
  ASSERT_NE(pool, nullptr);
  std::vector<pid_t> pids = pool->worker_pids();
  ASSERT_EQ(pids.size(), 1u);  // one at start, the other on demand
  pool.reset();
  EXPECT_EQ(kill(pids[0], 0), -1);  // exited and reaped
}

TEST_F(ProcessPoolTest, DefaultWorkerPathFindsTheBuiltWorker) {
  EXPECT_EQ(DefaultCompileWorkerPath(), Worker());
}

// The pool's worker compiles what the engine compiles in-process, byte for byte, and every job,
// even one refused at once, makes the round trip; the times are printed for a reader (the
// speed goals live in bench/, not here).
TEST_F(ProcessPoolTest, WorkerOutputMatchesInProcessAndEveryJobMakesTheRoundTrip) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(Worker(), 1));
  ASSERT_NE(pool, nullptr);
  std::unique_ptr<Compiler> local = NewNvrtcCompiler(toolkit_);
  CompileJob saxpy = Job(Saxpy(), "sm_89");
  absl::StatusOr<CompileOutput> from_pool = pool->Compile(saxpy);  // also warms both
  absl::StatusOr<CompileOutput> in_process = local->Compile(saxpy);
  ASSERT_TRUE(from_pool.ok()) << from_pool.status();
  ASSERT_TRUE(in_process.ok()) << in_process.status();
  ASSERT_EQ(from_pool->artifacts.size(), in_process->artifacts.size());
  for (size_t i = 0; i < in_process->artifacts.size(); ++i) {
    EXPECT_EQ(from_pool->artifacts[i].meta.key.Encode(),
              in_process->artifacts[i].meta.key.Encode());
    EXPECT_TRUE(from_pool->artifacts[i].bytes == in_process->artifacts[i].bytes)
        << "artifact " << i << " differs between the worker and the in-process compiler";
  }
  // Runs alternate so that load from elsewhere on the machine hits both sides alike.
  std::vector<double> in_process_ms, pool_ms;
  for (int i = 0; i < 7; ++i) {
    for (auto [compiler, ms] : {std::pair{local.get(), &in_process_ms},
                                std::pair<Compiler*, std::vector<double>*>{pool.get(), &pool_ms}}) {
      auto start = std::chrono::steady_clock::now();
      EXPECT_TRUE(compiler->Compile(saxpy).ok());
      ms->push_back(SecondsSince(start) * 1000);
    }
  }
  std::sort(in_process_ms.begin(), in_process_ms.end());
  std::sort(pool_ms.begin(), pool_ms.end());
  std::printf("saxpy sm_89, median of 7: in-process %.1f ms, through the pool %.1f ms\n",
              in_process_ms[3], pool_ms[3]);

  // A job the worker's compiler refuses at once (a NUL in the source) times the round trip
  // alone: framing, protobuf, the socket and the worker's per-job setup.
  KernelSpec nul = Saxpy();
  nul.source.push_back('\0');
  CompileJob refused = Job(nul, "sm_89");
  std::vector<double> micros;
  uint64_t compiles_before = pool->stats().compiles;
  for (int i = 0; i < 50; ++i) {
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(pool->Compile(refused).status().code(), absl::StatusCode::kInvalidArgument);
    micros.push_back(SecondsSince(start) * 1e6);
  }
  EXPECT_EQ(pool->stats().compiles, compiles_before + 50);  // each went to the worker
  std::sort(micros.begin(), micros.end());
  std::printf("round trip of a job the worker refuses at once: median %.0f us, p90 %.0f us\n",
              micros[25], micros[45]);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

// A job that waits for the only worker reports the wait apart from its compile, so the daemon
// can tell queue wait from compile time.
TEST_F(ProcessPoolTest, WaitForAFreeWorkerIsReportedApartFromTheCompile) {
  ProcessPoolOptions options = Options(FaultyWorker(), 1);
  options.wall_time_per_compile = absl::Seconds(1);
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(options);
  ASSERT_NE(pool, nullptr);
  absl::Status hang;
  std::thread first(
      [&] { hang = pool->Compile(Job(Faulty("KCACHE_TEST_HANG"), "sm_89")).status(); });
  EXPECT_TRUE(::kcache::testing::WaitFor([&] { return pool->stats().compiles > 0; }));
  ASSERT_EQ(pool->stats().compiles, 1u);  // the hang holds the worker until its 1 s limit
  absl::StatusOr<CompileOutput> queued = pool->Compile(Job(Saxpy(), "sm_89"));
  first.join();
  EXPECT_EQ(hang.code(), absl::StatusCode::kDeadlineExceeded) << hang;
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_GT(queued->queued_micros, 0);  // it waited for the hang's worker to be killed
  absl::StatusOr<CompileOutput> alone = pool->Compile(Job(Saxpy(), "sm_86"));
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_LT(alone->queued_micros, queued->queued_micros);  // nothing ahead of it
}

// A queued job nobody wants any more leaves the queue without compiling; one still wanted
// waits its turn.
TEST_F(ProcessPoolTest, QueuedJobNobodyWantsLeavesTheQueue) {
  ProcessPoolOptions options = Options(FaultyWorker(), 1);
  options.wall_time_per_compile = absl::Seconds(2);
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(options);
  ASSERT_NE(pool, nullptr);
  std::thread hang([&] { (void)pool->Compile(Job(Faulty("KCACHE_TEST_HANG"), "sm_89")); });
  EXPECT_TRUE(::kcache::testing::WaitFor([&] { return pool->stats().compiles > 0; }));
  std::atomic<bool> wanted{true};
  CompileJob job = Job(Saxpy(), "sm_89");
  job.demand = CompileDemand{"impatient", [&wanted] { return wanted.load(); }, nullptr};
  absl::Status dropped;
  std::thread queued([&] { dropped = pool->Compile(job).status(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  wanted = false;  // its caller gave up
  queued.join();   // long before the hang's 2 s limit frees the worker
  EXPECT_EQ(dropped.code(), absl::StatusCode::kCancelled) << dropped;
  EXPECT_NE(dropped.message().find("nobody waits for it any more"), absl::string_view::npos)
      << dropped;
  EXPECT_EQ(pool->stats().dropped, 1u);
  EXPECT_EQ(pool->stats().compiles, 1u);  // only the hang ran
  hang.join();
  ExpectServes(*pool);
}

// Every worker busy with a long compile (a bomb): a client with nothing running gets the
// reserve worker after `reserve_after`, not after the bomb; the bomber's own next job does not.
TEST_F(ProcessPoolTest, ReserveWorkerServesAnotherClientWhileEveryWorkerRunsABomb) {
  ProcessPoolOptions options = Options(FaultyWorker(), 1);
  options.wall_time_per_compile = absl::Seconds(6);
  options.reserve_after = absl::Milliseconds(500);
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(options);
  ASSERT_NE(pool, nullptr);
  std::atomic<bool> bomb_done{false};
  CompileJob bomb = Job(Faulty("KCACHE_TEST_HANG"), "sm_89");
  bomb.demand.client = "bomber";
  std::thread bomber([&] {
    (void)pool->Compile(bomb);
    bomb_done = true;
  });
  EXPECT_TRUE(::kcache::testing::WaitFor([&] { return pool->stats().compiles > 0; }));
  CompileJob small = Job(Saxpy(), "sm_89");
  small.demand.client = "victim";
  absl::StatusOr<CompileOutput> out = pool->Compile(small);
  EXPECT_FALSE(bomb_done) << "the victim waited for the bomb";
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(pool->stats().reserve_compiles, 1u);
  bomber.join();
  EXPECT_LE(pool->worker_pids().size(), 1u);  // the reserve's worker went with its compile
}

// Waits (up to 20 s) until `status` reads `stage`; what it reads then.
CompileStatus::View AwaitStage(const CompileStatus& status, CompileStage stage) {
  CompileStatus::View view = status.Read();
  for (int i = 0; i < 20000 && view.stage != stage; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    view = status.Read();
  }
  return view;
}

// With one worker busy, waiting jobs read where they are in the queue, in turn order (a
// client's second job behind another client's first), and compiling once they run.
TEST_F(ProcessPoolTest, QueuedJobsReadTheirPlaceInTurnOrderThenCompiling) {
  std::unique_ptr<ProcessPoolCompiler> pool = Pool(Options(FaultyWorker(), 1));
  ASSERT_NE(pool, nullptr);
  CompileJob slow = Job(Faulty("KCACHE_TEST_SLEEP_MS:4000"), "sm_89");
  slow.demand.client = "slow";
  slow.demand.status = std::make_shared<CompileStatus>();
  std::thread running([&] { EXPECT_TRUE(pool->Compile(slow).ok()); });
  ASSERT_EQ(AwaitStage(*slow.demand.status, CompileStage::kCompiling).stage,
            CompileStage::kCompiling);
  // a1 and a2 from client a, then b1 from client b: b1's turn comes before a2's.
  std::vector<CompileJob> jobs;
  for (const auto& [client, target] :
       {std::pair<std::string, std::string>{"a", "sm_86"}, {"a", "sm_80"}, {"b", "sm_75"}}) {
    jobs.push_back(Job(Saxpy(), target));
    jobs.back().demand.client = client;
    jobs.back().demand.status = std::make_shared<CompileStatus>();
  }
  std::vector<std::thread> waiting;
  for (CompileJob& job : jobs) {
    waiting.emplace_back([&pool, &job] { EXPECT_TRUE(pool->Compile(job).ok()); });
    ASSERT_EQ(AwaitStage(*job.demand.status, CompileStage::kQueued).stage, CompileStage::kQueued);
  }
  std::vector<uint32_t> behind;
  for (const CompileJob& job : jobs) behind.push_back(job.demand.status->Read().queued_behind);
  bool still_running = jobs[0].demand.status->Read().stage == CompileStage::kQueued;
  running.join();
  for (std::thread& t : waiting) t.join();
  ASSERT_TRUE(still_running) << "the slow compile ended before the queue was read";
  EXPECT_EQ(behind, (std::vector<uint32_t>{1, 3, 2}))  // the running one, then a1, b1, a2
      << behind[0] << " " << behind[1] << " " << behind[2];
  for (const CompileJob& job : jobs) {
    CompileStatus::View view = job.demand.status->Read();
    EXPECT_EQ(view.stage, CompileStage::kCompiling);  // it ran (and stays so once done)
    EXPECT_GT(view.compiling_for, absl::ZeroDuration());
  }
}

}  // namespace
}  // namespace kcache
