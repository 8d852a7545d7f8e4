// Nothing lost on a crash: `kcache warm --store` and a kcached warming through Warm are killed
// with SIGKILL in the middle of a warm; the store they left verifies clean (every value's
// checksums, `kcache doctor --store`), holds nothing half-written, and the next warm finishes
// the job without recompiling what was already stored.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::KcacheCli;
using ::kcache::testing::RunResult;

// Sixteen small kernels, each a distinct compile (~0.1 s per target on 2 cores).
std::string WriteManifest(const ::kcache::testing::TempDir& dir) {
  std::string manifest = "version: 1\nkernels:\n";
  for (int i = 0; i < 16; ++i) {
    std::string name = absl::StrCat("k", i);
    dir.Write(name + ".cu", absl::StrCat("extern \"C\" __global__ void ", name,
                                         "(float* y) { y[threadIdx.x] *= ", i + 2, ".0f; }\n"));
    absl::StrAppend(&manifest, "  - name: ", name, "\n    source: ", name, ".cu\n");
  }
  return dir.Write("manifest.yaml", manifest);
}

pid_t Spawn(const std::string& command) {
  pid_t pid = fork();
  if (pid == 0) {
    std::string exec = "exec " + command;  // the shell becomes the program: the kill reaches it
    execl("/bin/sh", "sh", "-c", exec.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Artifacts in the store now (0 while it does not exist yet).
absl::StatusOr<std::unique_ptr<Store>> OpenReadOnly(const std::string& path) {
  StoreOptions options;
  options.read_only = true;
  return OpenStore(path, options);
}

uint64_t StoredArtifacts(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenReadOnly(path);
  if (!store.ok()) return 0;
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  return stats.ok() ? stats->artifacts : 0;
}

void ExpectVerifiesClean(const std::string& store) {
  RunResult doctor =
      ::kcache::testing::Run(absl::StrCat(KcacheCli(), " doctor --store ", store, " 2>&1"));
  EXPECT_EQ(doctor.exit_code, 0) << doctor.output;
  absl::StatusOr<std::unique_ptr<Store>> opened = OpenReadOnly(store);
  ASSERT_TRUE(opened.ok()) << opened.status();
  absl::StatusOr<StoreVerifyReport> verified = (*opened)->Verify();
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_TRUE(verified->corrupt.empty());
}

TEST(KillDuringWarmTest, KcacheWarmKilledMidWayLeavesAStoreTheNextWarmCompletes) {
  ::kcache::testing::TempDir dir;
  std::string manifest = WriteManifest(dir);
  std::string store = dir / "store";
  std::string warm = absl::StrCat(KcacheCli(), " warm ", manifest, " --arch 7.5,8.6,8.9 --store ",
                                  store, " --jobs 2");
  pid_t pid = Spawn(warm + " >/dev/null 2>&1");
  // Kill it once some, but not all, of the 48 jobs (96 artifacts) are stored.
  uint64_t stored = 0;
  for (int i = 0; i < 3000 && (stored = StoredArtifacts(store)) < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_GE(stored, 8u) << "the warm never stored anything";
  ASSERT_LT(StoredArtifacts(store), 96u) << "the warm finished before it was killed";
  ExpectVerifiesClean(store);

  RunResult again = ::kcache::testing::Run(warm + " 2>&1");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(Contains(again.output, "cached")) << again.output;  // what was stored stays
  EXPECT_EQ(StoredArtifacts(store), 96u);
  ExpectVerifiesClean(store);
}

TEST(KillDuringWarmTest, KcachedKilledMidWarmRestartsOnItsStoreAndFinishes) {
  ::kcache::testing::TempDir dir;
  std::string manifest = WriteManifest(dir);
  ::kcache::testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::string warm = absl::StrCat(KcacheCli(), " warm ", manifest, " --arch 7.5,8.6,8.9 --server ",
                                  daemon.address());
  pid_t client = Spawn(warm + " >/dev/null 2>&1");
  auto stub = ::kcache::testing::NewStub(daemon.address());
  for (int i = 0; i < 3000 && ::kcache::testing::StatCounter(*stub, "compile.runs") < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  daemon.Kill(SIGKILL);
  daemon.Wait();
  int status = 0;
  waitpid(client, &status, 0);
  ExpectVerifiesClean(daemon.store_path());

  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  RunResult again = ::kcache::testing::Run(warm + " 2>&1");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  daemon.Stop();
  EXPECT_EQ(StoredArtifacts(daemon.store_path()), 96u);
  ExpectVerifiesClean(daemon.store_path());
}

}  // namespace
}  // namespace kcache
