// kcached builds, for the next load, SASS from PTX that a load sent (ArtifactCache::BuildFromPtx,
// `kcache cuda-build-ptx`; docs/ptx-libraries.md, "Built for the next pod"): a real kcached with
// the toolkit, real nvJitLink builds. What it builds is served by the PTX module's id; what it
// must not build (text that is not PTX, PTX above the GPU, a module over the bound, a kcached
// that compiles nothing) is refused with a reason and counted; PTX nvJitLink refuses is counted
// failed and leaves kcached serving. The queue's bounds: artifact_cache_test.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cubin.h"
#include "core/file_io.h"
#include "core/protocol.h"
#include "engine/fatbin/ptx_sass.h"
#include "tests/testutil/daemon_counters.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using testing::Contains;
using testing::DaemonProcess;
using testing::RunResult;

// A small PTX module as a library carries it: compute_75, one kernel.
std::string Ptx(int arch = 75, const std::string& body = "  ret;\n",
                const std::string& name = "k") {
  return absl::StrCat(".version 7.0\n.target sm_", arch, "\n.address_size 64\n\n.visible .entry ",
                      name, "(\n  .param .u64 p\n)\n{\n", body, "}\n");
}

class PtxBuildTest : public ::testing::Test {
 protected:
  // kcached with the machine's toolkit; compiles run unsandboxed where this kernel cannot
  // sandbox them (what is built here is the test's own PTX).
  void StartDaemon(std::vector<std::string> flags = {}) {
    flags.push_back("--allow-unsandboxed-compiles");
    testing::DaemonOptions options;
    options.extra_flags = flags;
    daemon_ = std::make_unique<DaemonProcess>(options);
    ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
  }

  // `kcache cuda-build-ptx` with `ptx` on its standard input.
  RunResult Ask(const std::string& ptx, const std::string& args = "--device 8.6") {
    std::string file = tmp_.Write(absl::StrCat("module", ++asked_, ".ptx"), ptx);
    return testing::Run(absl::StrCat(testing::KcacheCli(), " cuda-build-ptx --server ",
                                     daemon_->address(), " ", args, " < ", file));
  }

  // `kcache get --no-compile` of `ptx`'s module for `device`: the bytes, or "" with the output.
  std::string Served(const std::string& ptx, const std::string& device, std::string* output) {
    KernelId module = fatbin::PtxModuleId(ptx, "", fatbin::PtxSassCompileOptions());
    std::string out = tmp_ / absl::StrCat("served", ++asked_, ".cubin");
    RunResult get = testing::Run(absl::StrCat(testing::KcacheCli(), " get --server ",
                                              daemon_->address(), " --kernel ", module.Hex(),
                                              " --device ", device, " --no-compile -o ", out));
    *output = get.output;
    if (get.exit_code != 0) return "";
    absl::StatusOr<std::string> bytes = ReadWholeFile(out);
    return bytes.ok() ? *bytes : "";
  }

  int64_t Counter(const std::string& name) { return testing::DaemonCounter(*daemon_, name); }

  testing::TempDir tmp_;
  std::unique_ptr<DaemonProcess> daemon_;
  int asked_ = 0;
};

TEST_F(PtxBuildTest, SassBuiltForTheNextLoadIsServedByTheModuleId) {
  StartDaemon();
  std::string ptx = Ptx();
  std::string output;
  EXPECT_EQ(Served(ptx, "8.6", &output), "") << "served before it was built";
  RunResult asked = Ask(ptx);
  ASSERT_EQ(asked.exit_code, 0) << asked.output;
  EXPECT_TRUE(Contains(asked.output, "SASS for sm_86 from PTX module ")) << asked.output;
  EXPECT_TRUE(Contains(asked.output, "queued to build")) << asked.output;
  ASSERT_EQ(testing::WaitDaemonCounter(*daemon_, "ptx_builds.built", 1), 1) << daemon_->Log();
  std::string cubin = Served(ptx, "8.6", &output);
  ASSERT_FALSE(cubin.empty()) << output;
  absl::StatusOr<int> arch = CubinSmArch(cubin);
  ASSERT_TRUE(arch.ok()) << arch.status();
  EXPECT_EQ(*arch, 86);
  // Asked again: held, nothing built twice.
  RunResult again = Ask(ptx);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(Contains(again.output, "held already")) << again.output;
  EXPECT_EQ(Counter("ptx_builds.held"), 1);
  EXPECT_EQ(Counter("ptx_builds.built"), 1);
  EXPECT_EQ(Counter("ptx_builds.queued"), 1);
  // Another GPU's SASS of the same PTX is its own build.
  ASSERT_EQ(Ask(ptx, "--device 8.9").exit_code, 0);
  ASSERT_EQ(testing::WaitDaemonCounter(*daemon_, "ptx_builds.built", 2), 2) << daemon_->Log();
  arch = CubinSmArch(Served(ptx, "8.9", &output));
  ASSERT_TRUE(arch.ok()) << output;
  EXPECT_EQ(*arch, 89);
}

// "/path" of "unix:///path".
std::string UnixSocketPathOf(const std::string& address) { return address.substr(7); }

// A module nvJitLink takes seconds over (a hundred thousand fused multiply-adds): the one
// compile worker is busy with it while the next requests arrive, so that they wait in the queue.
std::string SlowPtx() {
  std::string body = "  .reg .f32 %f<32>;\n";
  for (int i = 0; i < 32; ++i) absl::StrAppend(&body, "  mov.f32 %f", i, ", 0f3F800000;\n");
  for (int i = 0; i < 60000; ++i) {
    absl::StrAppend(&body, "  fma.rn.f32 %f", i % 32, ", %f", (i * 7 + 3) % 32, ", %f",
                    (i * 13 + 5) % 32, ", %f", i % 32, ";\n");
  }
  for (int i = 0; i < 32; ++i)
    absl::StrAppend(&body, "  st.global.f32 [%rd1+", 4 * i, "], %f", i, ";\n");
  return Ptx(75, absl::StrCat("  .reg .u64 %rd<2>;\n  ld.param.u64 %rd1, [p];\n", body, "  ret;\n"),
             "slow");
}

TEST_F(PtxBuildTest, AClientsShareOfTheQueueIsItsUsersWhateverNamesItGivesItself) {
  StartDaemon(
      {"--compile-workers", "1", "--ptx-build-queue-per-client", "2", "--socket-mode", "0666"});
  ASSERT_EQ(Ask(SlowPtx(), "--device 8.6 --client slow").exit_code, 0);
  // Five more modules, each asked under a name of its own, while the slow one builds: one user's
  // share (2) waits, the rest are refused, naming the user.
  int queued = 0;
  std::string refusals;
  for (int i = 0; i < 5; ++i) {
    RunResult asked = Ask(Ptx(75, "  ret;\n", absl::StrCat("k", i)),
                          absl::StrCat("--device 8.6 --client name", i));
    if (asked.exit_code == 0) {
      ++queued;
    } else {
      refusals += asked.output;
    }
  }
  EXPECT_LE(queued, 2) << refusals;
  EXPECT_TRUE(Contains(refusals, absl::StrCat("client 'uid ", getuid(), "' has its share")))
      << refusals;
  // Another user is another client: its module waits beside this user's full share.
  if (getuid() == 0) {
    // The daemon's folder (made owner-only) opened for the other user to reach the socket.
    std::string socket = UnixSocketPathOf(daemon_->address());
    ASSERT_EQ(chmod(socket.substr(0, socket.rfind('/')).c_str(), 0711), 0);
    std::string file = tmp_.Write("other-user.ptx", Ptx(75, "  ret;\n", "other"));
    RunResult other = testing::Run(absl::StrCat(
        "setpriv --reuid 65534 --regid 65534 --clear-groups ", testing::KcacheCli(),
        " cuda-build-ptx --server ", daemon_->address(), " --device 8.6 --client name0 < ", file));
    EXPECT_EQ(other.exit_code, 0) << other.output;
    EXPECT_TRUE(Contains(other.output, "queued to build")) << other.output;
  }
}

TEST_F(PtxBuildTest, WhatCannotBeBuiltIsRefusedWithTheReasonAndCounted) {
  StartDaemon();
  struct Case {
    std::string ptx, args, says;
    int exit_code;
  };
  const Case cases[] = {
      {"int main() { return 0; }\n", "--device 8.6", "not PTX", 2},
      {Ptx(90), "--device 8.6", "PTX for compute_90 does not run on 8.6", 2},
      {Ptx(), "--device 0.0", "device", 2},
  };
  for (const Case& c : cases) {
    RunResult asked = Ask(c.ptx, c.args);
    EXPECT_EQ(asked.exit_code, c.exit_code) << asked.output;
    EXPECT_TRUE(Contains(asked.output, c.says)) << asked.output;
  }
  // Over the bound is refused before it is sent, with what to do instead.
  RunResult large = Ask(std::string(kMaxBuildPtxBytes + 1, ' '));
  EXPECT_EQ(large.exit_code, 2) << large.output;
  EXPECT_TRUE(Contains(large.output, "kcache warm --library")) << large.output;
  EXPECT_EQ(Counter("ptx_builds.refused"), 2);  // the SM 0.0 never left the tool
  EXPECT_EQ(Counter("ptx_builds.queued"), 0);
}

TEST_F(PtxBuildTest, PtxTheLinkerRefusesIsCountedFailedAndKcachedServesOn) {
  StartDaemon();
  RunResult asked = Ask(Ptx(75, "  this is not an instruction;\n  ret;\n"));
  ASSERT_EQ(asked.exit_code, 0) << asked.output;  // answered before it is built
  ASSERT_EQ(testing::WaitDaemonCounter(*daemon_, "ptx_builds.failed", 1), 1) << daemon_->Log();
  EXPECT_TRUE(Contains(daemon_->Log(), "not built")) << daemon_->Log();
  ASSERT_EQ(Ask(Ptx()).exit_code, 0);
  EXPECT_EQ(testing::WaitDaemonCounter(*daemon_, "ptx_builds.built", 1), 1) << daemon_->Log();
}

TEST_F(PtxBuildTest, AKcachedThatCompilesNothingRefusesAndSaysWhy) {
  StartDaemon({"--no-toolkit"});
  RunResult asked = Ask(Ptx());
  EXPECT_EQ(asked.exit_code, 1) << asked.output;
  EXPECT_TRUE(Contains(asked.output, "kcache warm --library")) << asked.output;
  EXPECT_EQ(Counter("ptx_builds.refused"), 1);
}

}  // namespace
}  // namespace kcache
