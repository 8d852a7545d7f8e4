// `kcache run` and the libraries' cache directories (client/cli/run_cache_dirs.h): a warm-up run
// in one "pod" (its own HOME, state and working directory) leaves the directory in the store; a
// new pod is served it before its command starts, with the same bytes and mtimes, from the
// store directory or through a real kcached serving that store baked; a key component changed,
// a failed command, or --no-cache-dirs serves or captures nothing; the command's exit status
// and the signals sent to kcache are the command's.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_run.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::RunResult;

class RunCacheDirsTest : public ::testing::Test {
 protected:
  // Runs `script` with sh under `kcache run [where] [flags]` in a pod of its own: HOME, state
  // directory and working directory under tmp/<pod>, Triton's directory at the image's path.
  RunResult InPod(const std::string& pod, const std::string& script, const std::string& flags = "",
                  const std::string& env = "", const std::string& where = "") {
    fs::create_directories(tmp_ / (pod + "/home"));
    std::string file = tmp_.Write(pod + ".sh", script);
    return testing::Run(absl::StrCat(
        "cd ", tmp_ / pod, " && env -i PATH=/usr/bin:/bin HOME=", tmp_ / (pod + "/home"),
        " KCACHE_STATE_DIR=", tmp_ / (pod + "/state"), " TRITON_CACHE_DIR=", triton_, " ", env, " ",
        testing::KcacheCli(), " run ",
        where.empty() ? absl::StrCat("--store ", tmp_ / "store") : where, " --shims ",
        tmp_ / (pod + "/shims"), " --arch 8.6 ", flags, " -- sh ", file));
  }

  // A warm-up that writes one kernel into Triton's directory, with a fixed mtime.
  static constexpr const char* kWarmUp =
      "mkdir -p \"$TRITON_CACHE_DIR/AB\" && printf 'cubin bytes' > \"$TRITON_CACHE_DIR/AB/k.cubin\""
      " && touch -d @1700000000 \"$TRITON_CACHE_DIR/AB/k.cubin\"\n";
  // What a new pod sees of it.
  static constexpr const char* kLook =
      "cat \"$TRITON_CACHE_DIR/AB/k.cubin\" 2>/dev/null || echo ABSENT; echo;"
      " stat -c 'mtime=%Y' \"$TRITON_CACHE_DIR/AB/k.cubin\" 2>/dev/null; true\n";

  void Capture() {
    RunResult warm = InPod("build", kWarmUp);
    ASSERT_EQ(warm.exit_code, 0) << warm.output;
    ASSERT_TRUE(Contains(warm.output, "kcache: triton: captured 1 files")) << warm.output;
    fs::remove_all(triton_);  // the image's build is done; a new pod starts without it
  }

  testing::TempDir tmp_;
  std::string triton_ = tmp_ / "image/triton";
};

TEST_F(RunCacheDirsTest, ANewPodIsServedTheDirectoryWithItsBytesAndMtimes) {
  Capture();
  RunResult pod = InPod("pod", kLook);
  ASSERT_EQ(pod.exit_code, 0) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "kcache: triton: served 1 files")) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "cubin bytes")) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "mtime=1700000000")) << pod.output;
}

TEST_F(RunCacheDirsTest, AServedDirectoryTheCommandKeptIsReportedAsUsed) {
  Capture();
  RunResult pod = InPod("pod", kLook, "--report");
  ASSERT_EQ(pod.exit_code, 0) << pod.output;
  EXPECT_TRUE(
      Contains(pod.output, absl::StrCat("kcache: report: triton: 1 files served into ", triton_,
                                        "; after the command 1 as served, 0 replaced, 0 "
                                        "removed, 0 written anew")))
      << pod.output;
  EXPECT_FALSE(Contains(pod.output, "WARNING")) << pod.output;
}

TEST_F(RunCacheDirsTest, AServedDirectoryTheLibraryBuiltAgainIsSaidLoudly) {
  Capture();
  // The library's own key differed: it ignored the kernel served and compiled it again.
  RunResult pod =
      InPod("pod",
            "printf 'other bytes!' > \"$TRITON_CACHE_DIR/AB/k.cubin\" && mkdir -p "
            "\"$TRITON_CACHE_DIR/CD\" && printf x > \"$TRITON_CACHE_DIR/CD/k.cubin\"\n");
  ASSERT_EQ(pod.exit_code, 0) << pod.output;
  EXPECT_TRUE(Contains(pod.output, absl::StrCat("kcache: WARNING: triton: the command did not use "
                                                "the 1 files served into ",
                                                triton_)))
      << pod.output;
  EXPECT_TRUE(Contains(pod.output, "(0 as served, 1 replaced, 0 removed, 1 written anew)"))
      << pod.output;
}

TEST_F(RunCacheDirsTest, TheSnapshotBoundsAreFlagsAndWhatIsPastThemIsLeftOutSaidSo) {
  std::string two =
      absl::StrCat(kWarmUp, "printf 'second kernel' > \"$TRITON_CACHE_DIR/AB/l.cubin\"\n");
  RunResult warm = InPod("build", two, "--cache-dir-max-files 1");
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_TRUE(Contains(warm.output, "kcache: triton: captured 1 files")) << warm.output;
  EXPECT_TRUE(Contains(warm.output, "past the 1 files bound")) << warm.output;
  fs::remove_all(tmp_ / "store");
  fs::remove_all(triton_);
  RunResult small = InPod("build2", two, "--cache-dir-max-file-bytes 12");
  EXPECT_TRUE(Contains(small.output, "bound of one file")) << small.output;
  RunResult bad = InPod("build3", two, "--cache-dir-max-bytes lots");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_TRUE(Contains(bad.output, "--cache-dir-max-bytes")) << bad.output;
}

TEST_F(RunCacheDirsTest, AnotherKeyIsNotServed) {
  Capture();
  for (const char* env : {"TRITON_DEFAULT_FP_FUSION=0", "NVCC_APPEND_FLAGS=-G"}) {
    RunResult pod = InPod(absl::StrCat("pod-", env[0] == 'T' ? "t" : "n"), kLook, "", env);
    ASSERT_EQ(pod.exit_code, 0) << pod.output;
    EXPECT_TRUE(Contains(pod.output, "ABSENT")) << env << ": " << pod.output;
    fs::remove_all(triton_);
  }
  RunResult other_sm = testing::Run(absl::StrCat(
      "cd ", tmp_.path(), " && env -i PATH=/usr/bin:/bin HOME=", tmp_ / "x", " KCACHE_STATE_DIR=",
      tmp_ / "x/state", " TRITON_CACHE_DIR=", triton_, " ", testing::KcacheCli(), " run --store ",
      tmp_ / "store", " --arch 9.0 -- sh -c 'ls \"$TRITON_CACHE_DIR/AB\" || echo ABSENT'"));
  EXPECT_TRUE(Contains(other_sm.output, "ABSENT")) << other_sm.output;
}

TEST_F(RunCacheDirsTest, AFailedCommandIsNotCapturedAndItsExitCodeIsKcachesToo) {
  RunResult failed = InPod("build", absl::StrCat(kWarmUp, "exit 3\n"));
  EXPECT_EQ(failed.exit_code, 3) << failed.output;
  EXPECT_FALSE(Contains(failed.output, "captured")) << failed.output;
  fs::remove_all(triton_);
  RunResult pod = InPod("pod", kLook);
  EXPECT_TRUE(Contains(pod.output, "ABSENT")) << pod.output;
}

TEST_F(RunCacheDirsTest, NoCacheDirsNeitherCapturesNorServes) {
  RunResult warm = InPod("build", kWarmUp, "--no-cache-dirs");
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_FALSE(Contains(warm.output, "captured")) << warm.output;
  Capture();
  RunResult pod = InPod("pod", kLook, "--no-cache-dirs");
  EXPECT_TRUE(Contains(pod.output, "ABSENT")) << pod.output;
}

TEST_F(RunCacheDirsTest, ADirectoryOfTheUsersOwnIsServedToo) {
  std::string mine = tmp_ / "image/mine";
  RunResult warm =
      InPod("build", absl::StrCat("mkdir -p ", mine, " && echo $MYJIT_MODE > ", mine, "/entry\n"),
            absl::StrCat("--cache-dir my-jit=", mine, ":MYJIT_"), "MYJIT_MODE=fast");
  ASSERT_TRUE(Contains(warm.output, "kcache: my-jit: captured 1 files")) << warm.output;
  fs::remove_all(mine);
  RunResult slow = InPod("pod", absl::StrCat("cat ", mine, "/entry || echo ABSENT\n"),
                         absl::StrCat("--cache-dir my-jit=", mine, ":MYJIT_"), "MYJIT_MODE=slow");
  EXPECT_TRUE(Contains(slow.output, "ABSENT")) << slow.output;
  RunResult fast = InPod("pod2", absl::StrCat("cat ", mine, "/entry || echo ABSENT\n"),
                         absl::StrCat("--cache-dir my-jit=", mine, ":MYJIT_"), "MYJIT_MODE=fast");
  EXPECT_TRUE(Contains(fast.output, "fast")) << fast.output;
}

TEST_F(RunCacheDirsTest, KcachedServesACaptureBakedIntoItAndKeepsItWhenCapturedAgain) {
  Capture();
  testing::DaemonOptions options;
  options.baked = {tmp_ / "store"};
  testing::DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok());
  std::string where = absl::StrCat("--server ", daemon.address());
  // The pod adds a file: its capture differs from the baked one, which is kept.
  RunResult pod = InPod("pod", absl::StrCat(kLook, "echo more > \"$TRITON_CACHE_DIR/AB/more\"\n"),
                        "", "", where);
  ASSERT_EQ(pod.exit_code, 0) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "kcache: triton: served 1 files")) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "cubin bytes")) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "a baked store holds snapshot")) << pod.output;
}

TEST_F(RunCacheDirsTest, AKcachedAwayIsAskedOnceAndTheCommandRuns) {
  RunResult pod =
      InPod("pod", "echo RAN\n", "", "", absl::StrCat("--server unix://", tmp_ / "nobody.sock"));
  EXPECT_EQ(pod.exit_code, 0) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "RAN")) << pod.output;
  EXPECT_EQ(testing::Occurrences(pod.output, " not served: "), 1) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "kcached does not answer; the rest are not served"))
      << pod.output;
}

// A hung kcached (stopped: it takes connections and answers nothing) costs the pod one
// launcher's budget (KCACHE_TIMEOUT_MS), not a transfer's timeout per directory.
TEST_F(RunCacheDirsTest, AHungKcachedCostsOneBudgetAndTheCommandRuns) {
  Capture();
  testing::DaemonOptions options;
  options.baked = {tmp_ / "store"};
  testing::DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok());
  ASSERT_TRUE(daemon.Pause());
  auto start = std::chrono::steady_clock::now();
  RunResult pod = InPod("pod", "echo RAN\n", "", "KCACHE_TIMEOUT_MS=500",
                        absl::StrCat("--server ", daemon.address(), " --no-cuda"));
  auto took = std::chrono::steady_clock::now() - start;
  daemon.Kill(SIGKILL);
  EXPECT_EQ(pod.exit_code, 0) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "RAN")) << pod.output;
  EXPECT_TRUE(Contains(pod.output, "kcached does not answer; the rest are not served"))
      << pod.output;
  EXPECT_LT(took, std::chrono::seconds(20)) << "a transfer's 60 s timeout was waited";
}

TEST_F(RunCacheDirsTest, ASignalSentToKcacheReachesTheCommandAndEndsKcacheAsIt) {
  std::string script =
      tmp_.Write("sleep.sh", "trap 'kill $s; echo GOT-TERM; exit 7' TERM\nsleep 30 & s=$!; wait\n");
  RunResult r = testing::Run(absl::StrCat(
      "cd ", tmp_.path(), " && env -i PATH=/usr/bin:/bin HOME=", tmp_.path(),
      " KCACHE_STATE_DIR=", tmp_ / "state", " sh -c '", testing::KcacheCli(), " run --store ",
      tmp_ / "store", " -- sh ", script, " & p=$!; sleep 1; kill -TERM $p; wait $p; echo rc=$?'"));
  EXPECT_TRUE(Contains(r.output, "GOT-TERM")) << r.output;
  EXPECT_TRUE(Contains(r.output, "rc=7")) << r.output;
  RunResult killed = testing::Run(absl::StrCat(
      "cd ", tmp_.path(), " && env -i PATH=/usr/bin:/bin HOME=", tmp_.path(),
      " KCACHE_STATE_DIR=", tmp_ / "state", " sh -c '", testing::KcacheCli(), " run --store ",
      tmp_ / "store", " -- sh -c \"kill -KILL \\$\\$\"; echo rc=$?'"));
  EXPECT_TRUE(Contains(killed.output, "rc=137")) << killed.output;
}

}  // namespace
}  // namespace kcache
