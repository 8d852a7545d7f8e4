// `kcache cache-dirs` (client/cli/cache_dirs_command.h) in an environment made for it: a
// virtual environment whose site-packages has torch's and Triton's records, a Triton cache
// directory with entries and a temporary Triton leaves out, a directory of the user's own.
// What it lists is where each library's directory is in that environment, what it holds, the
// library's version, and a key that changes with what decides the files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::Contains;
using testing::RunResult;

class CacheDirsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::path site = fs::path(tmp_ / "venv/lib/python3.11/site-packages");
    fs::create_directories(tmp_ / "venv/bin");
    std::ofstream(tmp_ / "venv/bin/python3") << "";
    fs::create_directories(site / "torch-2.15.0.dist-info");
    fs::create_directories(site / "triton-3.6.0.dist-info");
    triton_ = tmp_ / "triton-cache";
    fs::create_directories(fs::path(triton_) / "ABCD");
    std::ofstream(fs::path(triton_) / "ABCD/add_kernel.cubin") << std::string(1000, 'c');
    std::ofstream(fs::path(triton_) / "ABCD/__grp__add_kernel.json") << "{}";
    fs::create_directories(fs::path(triton_) / "EFGH/tmp.pid_12_ab");
    std::ofstream(fs::path(triton_) / "EFGH/tmp.pid_12_ab/half.cubin") << "partial";
    fs::create_directories(tmp_ / "home");
  }

  RunResult CacheDirs(const std::string& args, const std::string& env = "") {
    return testing::Run(absl::StrCat("env -i HOME=", tmp_ / "home", " PATH=", tmp_ / "venv/bin",
                                     ":/usr/bin:/bin TRITON_CACHE_DIR=", triton_,
                                     " CUDA_HOME=", tmp_ / "no-toolkit", " ", env, " ",
                                     testing::KcacheCli(), " cache-dirs ", args, " 2>&1"));
  }

  json Row(const json& out, const std::string& name) {
    for (const json& row : out["directories"]) {
      if (row["name"] == name) return row;
    }
    ADD_FAILURE() << "no row " << name << " in " << out.dump(2);
    return json::object();
  }

  testing::TempDir tmp_;
  std::string triton_;
};

TEST_F(CacheDirsCommandTest, ListsEachDirectoryWhereThisEnvironmentHasIt) {
  RunResult r = CacheDirs("--json --arch 8.6,9.0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json out = json::parse(r.output);
  EXPECT_EQ(out["sms"], json::array({"8.6", "9.0"}));
  json triton = Row(out, "triton");
  EXPECT_EQ(triton["directory"], triton_);
  EXPECT_EQ(triton["version"], "3.6.0");
  EXPECT_EQ(triton["exists"], true);
  EXPECT_EQ(triton["files"], 2) << "the temporary of a compile in flight is left out";
  EXPECT_EQ(triton["bytes"], 1002);
  EXPECT_EQ(triton["components"]["path"], triton_);
  EXPECT_EQ(triton["components"]["sms"], "8.6,9.0");
  json inductor = Row(out, "inductor");
  EXPECT_EQ(inductor["version"], "2.15.0") << "Inductor is torch's";
  EXPECT_EQ(inductor["exists"], false);
  EXPECT_EQ(Row(out, "vllm")["version"], "") << "not installed";
  EXPECT_EQ(Row(out, "vllm")["directory"], tmp_ / "home/.cache/vllm");

  RunResult text = CacheDirs("--arch 8.6,9.0");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_TRUE(Contains(text.output, triton_)) << text.output;
  EXPECT_TRUE(Contains(text.output, "SMs: 8.6,9.0 (--arch")) << text.output;
}

TEST_F(CacheDirsCommandTest, TheKeyChangesWithWhatDecidesTheFiles) {
  auto key = [&](const std::string& args, const std::string& env, const std::string& name) {
    RunResult r = CacheDirs(absl::StrCat("--json ", args), env);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return Row(json::parse(r.output), name)["key"].get<std::string>();
  };
  std::string base = key("--arch 8.6", "", "triton");
  EXPECT_EQ(key("--arch 8.6", "VLLM_USE_V2=1", "triton"), base) << "another library's variable";
  EXPECT_NE(key("--arch 9.0", "", "triton"), base);
  EXPECT_NE(key("--arch 8.6", "TRITON_DEFAULT_FP_FUSION=0", "triton"), base);
  EXPECT_NE(key("--arch 8.6", "NVCC_APPEND_FLAGS=-G", "triton"), base);
  EXPECT_NE(key("--arch 8.6", "VLLM_USE_V2=1", "vllm"), key("--arch 8.6", "", "vllm"));
}

TEST_F(CacheDirsCommandTest, AUsersDirectoryIsListedAndKeyed) {
  fs::create_directories(tmp_ / "mine");
  std::ofstream(tmp_ / "mine/entry.bin") << "1234";
  RunResult r =
      CacheDirs(absl::StrCat("--json --arch 8.6 --cache-dir my-jit=", tmp_ / "mine", ":MYJIT_"),
                "MYJIT_MODE=fast");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json mine = Row(json::parse(r.output), "my-jit");
  EXPECT_EQ(mine["user_added"], true);
  EXPECT_EQ(mine["files"], 1);
  EXPECT_EQ(mine["components"]["env MYJIT_MODE"], "fast");
}

TEST_F(CacheDirsCommandTest, BadFlagsAreBadInputSayingWhatIsWrong) {
  RunResult relative = CacheDirs("--cache-dir mine=relative/dir");
  EXPECT_EQ(relative.exit_code, 2) << relative.output;
  EXPECT_TRUE(Contains(relative.output, "DIR must be an absolute path")) << relative.output;
  RunResult known = CacheDirs("--cache-dir triton=/x");
  EXPECT_EQ(known.exit_code, 2) << known.output;
  EXPECT_TRUE(Contains(known.output, "kcache knows already")) << known.output;
  RunResult arch = CacheDirs("--arch 8.6,banana");
  EXPECT_EQ(arch.exit_code, 2) << arch.output;
  EXPECT_TRUE(Contains(arch.output, "--arch 8.6,banana")) << arch.output;
}

// Under `kcache run`, $CUDA_HOME is kcache's shim root; the key names the toolkit behind it.
TEST_F(CacheDirsCommandTest, UnderKcacheRunTheToolkitIsTheRealOneNotTheShim) {
  // The JSON goes to a file and stderr to another: kcache run says what it routes on stderr (a
  // ccache launcher variable left as the environment has it, for one). The braces keep Run's
  // 2>&1 off the command itself.
  std::string out = tmp_ / "out.json", err = tmp_ / "err.txt";
  auto toolkit = [&](const std::string& prefix) {
    RunResult r = testing::Run(absl::StrCat(
        "{ env -u CUDA_HOME -u CUDA_PATH KCACHE_STATE_DIR=", tmp_ / "state", " ", prefix,
        testing::KcacheCli(), " cache-dirs --json --arch 8.6 >", out, " 2>", err, "; }"));
    std::ifstream in(out), errors(err);
    std::string said((std::istreambuf_iterator<char>(errors)), std::istreambuf_iterator<char>());
    EXPECT_EQ(r.exit_code, 0) << said;
    json parsed = json::parse(in, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << "not JSON; stderr: " << said;
    return parsed.is_discarded() ? std::string("(not JSON)") : parsed["toolkit"].get<std::string>();
  };
  std::string alone = toolkit("");
  if (alone.empty()) GTEST_SKIP() << "no CUDA toolkit with an nvcc here";
  EXPECT_EQ(toolkit(absl::StrCat(testing::KcacheCli(), " run --no-cache-dirs --store ",
                                 tmp_ / "store", " --shims ", tmp_ / "shims", " -- ")),
            alone);
}

TEST_F(CacheDirsCommandTest, ADirectoryThatCannotBeSaidIsShownWithWhy) {
  RunResult r = testing::Run(absl::StrCat("env -i PATH=/usr/bin:/bin ", testing::KcacheCli(),
                                          " cache-dirs --json --arch 8.6 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json triton = Row(json::parse(r.output), "triton");
  EXPECT_TRUE(Contains(triton["error"].get<std::string>(), "$HOME is not set")) << triton.dump();
}

}  // namespace
}  // namespace kcache
