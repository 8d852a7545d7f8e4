// The `kcache` tool as a user runs it: warm, warm again, ls, stat, get, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/cubin.h"
#include "kcache/device.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;

using ::kcache::testing::KcacheCli;
using ::kcache::testing::RunResult;
using ::kcache::testing::TempDir;
namespace fs = std::filesystem;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::kcache::testing::WriteTestKernelFiles(dir_);
    manifest_ = dir_.Write("manifest.yaml", ::kcache::testing::kTestManifest);
    store_ = dir_ / "store";
  }
  RunResult Kcache(const std::string& args) {
    return ::kcache::testing::Run(KcacheCli() + " " + args);
  }
  RunResult WarmStore(const std::string& arch) {
    return Kcache("warm --arch " + arch + " --store " + store_ + " " + manifest_);
  }

  TempDir dir_;
  std::string manifest_;
  std::string store_;
};

TEST_F(CliTest, WarmThenWarmAgainCompilesNothing) {
  RunResult first = WarmStore("7.5,8.6");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(Contains(first.output, "built")) << first.output;
  EXPECT_TRUE(Contains(first.output, "below the kernel's min_arch 8.0")) << first.output;
  RunResult second = WarmStore("7.5,8.6");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_FALSE(Contains(second.output, "] built")) << second.output;
  EXPECT_TRUE(Contains(second.output, "] cached")) << second.output;
}

TEST_F(CliTest, LsAndStatPrintJson) {
  ASSERT_EQ(WarmStore("8.6").exit_code, 0);
  RunResult ls = Kcache("ls --json --store " + store_);
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  nlohmann::json kernels = nlohmann::json::parse(ls.output);
  ASSERT_EQ(kernels.size(), 2u);
  for (const auto& k : kernels) {
    EXPECT_EQ(k["artifacts"].size(), 2u) << k.dump();  // sm_86 cubin + compute_86 PTX
    EXPECT_EQ(k["id"].get<std::string>().size(), 64u);
  }
  RunResult stat = Kcache("stat --json --store " + store_);
  ASSERT_EQ(stat.exit_code, 0) << stat.output;
  nlohmann::json s = nlohmann::json::parse(stat.output);
  EXPECT_EQ(s["kernels"], 2);
  EXPECT_EQ(s["artifacts"], 4);
  EXPECT_EQ(s["checksum_failures"], 0);
  RunResult text = Kcache("ls --store " + store_);
  EXPECT_TRUE(Contains(text.output, "saxpy")) << text.output;
  // The arch column: saxpy declares no bounds, scale declares min_arch 8.0.
  std::istringstream lines(text.output);
  std::string line;
  bool saxpy = false, scale = false;
  while (std::getline(lines, line)) {
    if (line.rfind("saxpy ", 0) == 0) saxpy = Contains(line, " any ");
    if (line.rfind("scale ", 0) == 0) scale = Contains(line, " 8.0+ ");
  }
  EXPECT_TRUE(saxpy && scale) << text.output;
  EXPECT_FALSE(Contains(text.output, "-+")) << text.output;
}

TEST_F(CliTest, GetWritesTheCubinTheDeviceWouldBeServed) {
  ASSERT_EQ(WarmStore("7.5,8.6").exit_code, 0);
  std::string out = dir_ / "k.cubin";
  RunResult get =
      Kcache("get --no-compile --store " + store_ + " --device 8.9 --kernel saxpy -o " + out);
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_TRUE(Contains(get.output, "compatible_sass")) << get.output;
  std::ifstream in(out, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(*CubinSmArch(bytes.str()), 86);

  RunResult below = Kcache("get --no-compile --store " + store_ + " --device 7.5 --kernel scale");
  EXPECT_EQ(below.exit_code, 1) << below.output;
  EXPECT_TRUE(Contains(below.output, "needs SM 8.0")) << below.output;

  // 9.0 was not warmed: only the compute_86 PTX runs there. Without compiling (or asking for
  // an answer now) it is served for the driver to JIT; otherwise sm_90 is compiled (a JIT at
  // every worker start is what kcache removes) and stored, and served exactly from then on.
  for (const char* flags : {" --no-compile", " --ptx-now"}) {
    RunResult jit = Kcache("get --store " + store_ + " --device 9.0 --kernel saxpy --json" + flags);
    ASSERT_EQ(jit.exit_code, 0) << flags << jit.output;
    nlohmann::json meta = nlohmann::json::parse(jit.output);
    EXPECT_EQ(meta["rule"], "ptx_jit") << flags;
    EXPECT_EQ(meta["needs_jit"], true) << flags;
    EXPECT_EQ(meta["target"], "compute_86") << flags;
  }
  // --ptx-now compiled sm_90 after answering: it is stored now.
  RunResult exact = Kcache("get --store " + store_ + " --device 9.0 --kernel saxpy --json");
  ASSERT_EQ(exact.exit_code, 0) << exact.output;
  nlohmann::json meta = nlohmann::json::parse(exact.output);
  EXPECT_EQ(meta["rule"], "exact_sass");
  EXPECT_EQ(meta["target"], "sm_90");
  RunResult compiled = Kcache("get --store " + store_ + " --device 10.0 --kernel saxpy --json");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  meta = nlohmann::json::parse(compiled.output);
  EXPECT_EQ(meta["rule"], "compiled");
  EXPECT_EQ(meta["needs_jit"], false);
  EXPECT_EQ(meta["target"], "sm_100");
}

TEST_F(CliTest, UnsupportedTargetListsWhatIsSupported) {
  RunResult r = WarmStore("7.0,8.6");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "sm_70")) << r.output;
  EXPECT_TRUE(Contains(r.output, "7.5")) << r.output;
  EXPECT_TRUE(Contains(r.output, "12.1")) << r.output;
}

TEST_F(CliTest, ArchNativeWithoutAGpuIsBadInputAndCompilesNothing) {
  if (client::DetectDevices().ok()) GTEST_SKIP() << "this machine has a GPU";
  RunResult r = WarmStore("native");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "--arch native takes the SMs of this machine's GPUs")) << r.output;
  EXPECT_TRUE(Contains(r.output, "--arch 7.5,8.6,8.9")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(store_)) << r.output;
}

TEST_F(CliTest, GetForANodeWritesOneArtifactPerDistinctSm) {
  ASSERT_EQ(WarmStore("7.5,8.6").exit_code, 0);
  std::string out = dir_ / "node";
  RunResult get = Kcache("get --store " + store_ + " --device 7.5,8.6,8.6 --kernel saxpy -o " +
                         out + " --no-compile");
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/saxpy.sm_75.cubin")) << get.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/saxpy.sm_86.cubin")) << get.output;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(out),
                          std::filesystem::directory_iterator()),
            2)
      << get.output;
  EXPECT_EQ(Kcache("get --store " + store_ + " --device 8.6,eight --kernel saxpy").exit_code, 2);
}

TEST_F(CliTest, BrokenManifestNamesFileLineAndField) {
  std::string bad =
      dir_.Write("bad.yaml", "version: 1\nkernels:\n  - name: saxpy\n    sourc: saxpy.cu\n");
  RunResult r = Kcache("warm --arch 8.6 --store " + store_ + " " + bad);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "bad.yaml:4:5: kernels[0].sourc: unknown field")) << r.output;
}

TEST_F(CliTest, MissingToolkitNamesCudaHome) {
  RunResult r = Kcache("warm --arch 8.6 --toolkit " + (dir_ / "no-cuda") + " --store " + store_ +
                       " " + manifest_);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "no-cuda")) << r.output;
  EXPECT_TRUE(Contains(r.output, "CUDA_HOME")) << r.output;
}

TEST_F(CliTest, CompileErrorPrintsKernelTargetAndLogAndExitsNonZero) {
  std::string m =
      dir_.Write("broken.yaml", "version: 1\nkernels:\n  - name: broken\n    source: broken.cu\n");
  RunResult r = Kcache("warm --arch 8.6 --store " + store_ + " " + m);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "FAILED  broken")) << r.output;
  EXPECT_TRUE(Contains(r.output, "sm_86")) << r.output;
  EXPECT_TRUE(Contains(r.output, "undeclared_identifier")) << r.output;
  // The log names the source as the manifest does, not the program's content-derived name.
  EXPECT_TRUE(Contains(r.output,
                       "broken.cu(3): error: identifier \"undeclared_identifier\" is "
                       "undefined"))
      << r.output;
  EXPECT_FALSE(Contains(r.output, "kernel_")) << r.output;
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Kcache("warm --store " + store_ + " " + manifest_).exit_code, 2);  // no --arch
  EXPECT_EQ(Kcache("get --store " + store_ + " --device 8.x --kernel saxpy").exit_code, 2);
  EXPECT_EQ(Kcache("--help").exit_code, 0);
}

TEST_F(CliTest, ReadingCommandsNeverCreateAStore) {
  std::string absent = dir_ / "absent";
  fs::create_directories(dir_ / "empty");
  std::string empty = dir_ / "empty";
  for (const std::string& command :
       {"ls --store " + absent, "stat --store " + absent,
        "get --store " + absent + " --device 8.6 --kernel saxpy",
        "get --store " + absent + " --device 8.6 --kernel saxpy --no-compile"}) {
    RunResult r = Kcache(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "'" + absent +
                                       "' is not a kcache store (no such directory); "
                                       "make one with `kcache warm --store " +
                                       absent))
        << command << "\n"
        << r.output;
    EXPECT_FALSE(fs::exists(absent)) << command;
  }
  RunResult r = Kcache("get --store " + empty + " --device 8.6 --kernel saxpy");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "'" + empty + "' is not a kcache store (an empty directory)"))
      << r.output;
  EXPECT_TRUE(fs::is_empty(empty));
}

}  // namespace
}  // namespace kcache
