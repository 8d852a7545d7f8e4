// The `kcache` tool's --server modes against a real kcached: warm, get, ls, stat,
// export-manifest, and the usage errors around --store / --server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;

using ::kcache::testing::KcacheCli;
using ::kcache::testing::RunResult;
using nlohmann::json;

class CliServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::kcache::testing::WriteTestKernelFiles(dir_);
    manifest_ = dir_.Write("manifest.yaml", ::kcache::testing::kTestManifest);
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    server_ = " --server " + daemon_.address();
  }
  RunResult Kcache(const std::string& args) {
    return ::kcache::testing::Run(KcacheCli() + " " + args);
  }

  ::kcache::testing::TempDir dir_;
  ::kcache::testing::DaemonProcess daemon_;
  std::string manifest_;
  std::string server_;
};

TEST_F(CliServerTest, WarmGetLsStatAndExportThroughTheDaemon) {
  RunResult warm = Kcache("warm --arch 7.5,8.6" + server_ + " " + manifest_);
  ASSERT_EQ(warm.exit_code, 0) << warm.output << daemon_.Log();
  EXPECT_TRUE(Contains(warm.output, "] built")) << warm.output;
  EXPECT_TRUE(Contains(warm.output, "min_arch")) << warm.output;  // scale skipped on 7.5
  EXPECT_TRUE(Contains(warm.output, "done")) << warm.output;
  RunResult again = Kcache("warm --arch 7.5,8.6" + server_ + " " + manifest_);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_FALSE(Contains(again.output, "] built")) << again.output;

  std::string out = dir_ / "scale.cubin";
  RunResult get = Kcache("get --device 8.9 --kernel scale -o " + out + server_);
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_TRUE(Contains(get.output, "compatible_sass")) << get.output;
  EXPECT_TRUE(Contains(get.output, "served from daemon:")) << get.output;
  EXPECT_TRUE(std::filesystem::exists(out));
  RunResult get_json = Kcache("get --json --device 8.6 --kernel saxpy" + server_);
  ASSERT_EQ(get_json.exit_code, 0) << get_json.output;
  json got = json::parse(get_json.output);
  EXPECT_EQ(got["rule"], "exact_sass");
  EXPECT_EQ(got["target"], "sm_86");
  EXPECT_EQ(std::filesystem::file_size(out) > 0, true);

  RunResult ls = Kcache("ls --json" + server_);
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_EQ(json::parse(ls.output).size(), 2u) << ls.output;

  RunResult stat = Kcache("stat --json" + server_);
  ASSERT_EQ(stat.exit_code, 0) << stat.output;
  json s = json::parse(stat.output);
  EXPECT_FALSE(s["counters"].empty()) << stat.output;
  RunResult stat_text = Kcache("stat" + server_);
  ASSERT_EQ(stat_text.exit_code, 0) << stat_text.output;
  EXPECT_TRUE(Contains(stat_text.output, "counter")) << stat_text.output;

  std::string seen = dir_ / "seen.yaml";  // stdout is the YAML, stderr a one-line note
  RunResult exported =
      ::kcache::testing::Run("(" + KcacheCli() + " export-manifest" + server_ + " > " + seen + ")");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(Contains(exported.output, "exported 2 kernels")) << exported.output;
  std::ifstream in(seen);
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(Contains(yaml, "kernels:")) << yaml;
  EXPECT_TRUE(Contains(yaml, "name: scale")) << yaml;  // asked for by `get` above
  // The union of the SMs workers asked for, as the warm to run for them.
  EXPECT_TRUE(Contains(yaml, "on SMs 8.6 8.9")) << yaml;
  EXPECT_TRUE(Contains(yaml, "kcache warm --arch 8.6,8.9 <this file>")) << yaml;
  // What it prints is a manifest the local warm reads as is.
  RunResult rewarm = Kcache("warm --arch 8.9 --store " + (dir_ / "fresh") + " " + seen);
  EXPECT_EQ(rewarm.exit_code, 0) << rewarm.output << "\n" << yaml;
}

TEST_F(CliServerTest, SeveralKernelsInOneGetAreWrittenIntoADirectory) {
  RunResult warm = Kcache("warm --arch 8.6" + server_ + " " + manifest_);
  ASSERT_EQ(warm.exit_code, 0) << warm.output << daemon_.Log();
  std::string out = dir_ / "kernels";
  RunResult get =
      Kcache("get --device 8.6 --kernel saxpy --kernel scale --kernel nope -o " + out + server_);
  EXPECT_EQ(get.exit_code, 1) << get.output;  // nope: not found; the other two still written
  EXPECT_TRUE(Contains(get.output, "nope: ")) << get.output;
  EXPECT_TRUE(Contains(get.output, "2 of 3 kernels in ")) << get.output;
  EXPECT_GT(std::filesystem::file_size(out + "/saxpy.sm_86.cubin"), 0u) << get.output;
  EXPECT_GT(std::filesystem::file_size(out + "/scale.sm_86.cubin"), 0u) << get.output;

  RunResult get_json = Kcache("get --json --device 8.6 --kernel saxpy --kernel scale" + server_);
  ASSERT_EQ(get_json.exit_code, 0) << get_json.output;
  json got = json::parse(get_json.output);
  ASSERT_EQ(got.size(), 2u) << get_json.output;
  EXPECT_EQ(got[0]["target"], "sm_86");
  EXPECT_EQ(got[1]["target"], "sm_86");
}

TEST_F(CliServerTest, StoreAndServerTogetherOrNeitherIsAUsageError) {
  for (const std::string cmd : {"stat", "ls"}) {
    RunResult both = Kcache(cmd + " --store " + (dir_ / "s") + server_);
    EXPECT_EQ(both.exit_code, 2) << both.output;
    EXPECT_TRUE(Contains(both.output, "--server")) << both.output;
    RunResult neither = Kcache(cmd);
    EXPECT_EQ(neither.exit_code, 2) << neither.output;
    EXPECT_TRUE(Contains(neither.output, "--store DIR")) << neither.output;
  }
  RunResult warm = Kcache("warm --arch 8.6 --store " + (dir_ / "s") + server_ + " " + manifest_);
  EXPECT_EQ(warm.exit_code, 2) << warm.output;
}

TEST_F(CliServerTest, UnknownKernelAndAbsentDaemonFailWithReasons) {
  RunResult unknown = Kcache("get --device 8.9 --kernel no_such_kernel" + server_);
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_TRUE(Contains(unknown.output, "no_such_kernel")) << unknown.output;
  RunResult absent = Kcache("stat --server unix://" + (dir_ / "absent.sock"));
  EXPECT_EQ(absent.exit_code, 1) << absent.output;
  EXPECT_TRUE(Contains(absent.output, "is kcached running")) << absent.output;
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

// Through the daemon too (its compile workers), a compile error names the source file as the
// manifest gives it; the kernel id is the same as for a spec without that name.
TEST_F(CliServerTest, CompileErrorThroughTheDaemonNamesTheSourceFile) {
  std::string broken =
      dir_.Write("broken.yaml", "version: 1\nkernels:\n  - name: broken\n    source: broken.cu\n");
  RunResult r = Kcache("warm --arch 8.6" + server_ + " " + broken);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "broken.cu(3): error: identifier \"undeclared_identifier\" is "
                       "undefined"))
      << r.output;
  EXPECT_FALSE(Contains(r.output, "kernel_")) << r.output;
}

}  // namespace
}  // namespace kcache
