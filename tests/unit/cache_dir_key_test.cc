// The key of a cache directory's snapshot (engine/cache_dirs/cache_dir_key.h): every component
// that decides the files' bytes and that the library's own key misses changes it, each on its
// own; what does not decide them (another library's variables, where an unkeyed directory is,
// the order SMs are listed in) does not; and a difference is named.
#include "engine/cache_dirs/cache_dir_key.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "engine/cache_dirs/installed_versions.h"
#include "tests/testutil/cache_dirs.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::cache_dirs {
namespace {

const CacheDirSpec& Known(const std::string& name) { return testing::KnownRow(name); }

CacheDirContext Base() {
  CacheDirContext c;
  c.versions = {{"vllm", "0.14.0"}, {"torch", "2.15.0"}, {"triton", "3.6.0"}};
  c.sms = {"9.0", "8.6"};
  c.toolkit = "13.0.88";
  c.driver = "13000";
  c.env = {{"HOME", "/home/u"}, {"VLLM_USE_V2", "1"}, {"PATH", "/usr/bin"}};
  c.command_line = {"vllm", "serve", "m", "--num-speculative-tokens", "2"};
  return c;
}

struct Change {
  const char* what;  // the component that must differ
  std::function<void(CacheDirContext&, std::string& dir)> apply;
};

TEST(CacheDirKeyTest, EveryComponentOfVllmsKeyMisses) {
  const CacheDirSpec& vllm = Known("vllm");
  const std::string dir = "/home/u/.cache/vllm";
  CacheDirKey base = KeyFor(vllm, dir, Base());
  EXPECT_EQ(base.digest.size(), 64u);
  const Change changes[] = {
      {"version", [](CacheDirContext& c, std::string&) { c.versions["vllm"] = "0.14.1"; }},
      {"sms",
       [](CacheDirContext& c, std::string&) {
         c.sms = {"9.0a", "8.6"};
       }},
      {"sms", [](CacheDirContext& c, std::string&) { c.sms = {"9.0"}; }},
      {"toolkit", [](CacheDirContext& c, std::string&) { c.toolkit = "13.2.51"; }},
      {"torch", [](CacheDirContext& c, std::string&) { c.versions["torch"] = "2.14.0"; }},
      {"command_line", [](CacheDirContext& c, std::string&) { c.command_line.back() = "3"; }},
      {"command_line",
       [](CacheDirContext& c, std::string&) {
         c.command_line = {"vllm", "serve", "m", "--num-speculative-tokens 2"};
       }},
      {"env VLLM_USE_V2", [](CacheDirContext& c, std::string&) { c.env["VLLM_USE_V2"] = "0"; }},
      {"env VLLM_ATTENTION_BACKEND",
       [](CacheDirContext& c, std::string&) { c.env["VLLM_ATTENTION_BACKEND"] = "FLASHINFER"; }},
      {"env NVCC_APPEND_FLAGS",
       [](CacheDirContext& c, std::string&) { c.env["NVCC_APPEND_FLAGS"] = "-lineinfo"; }},
      {"env NVCC_PREPEND_FLAGS",
       [](CacheDirContext& c, std::string&) { c.env["NVCC_PREPEND_FLAGS"] = "-G"; }},
  };
  for (const Change& change : changes) {
    CacheDirContext c = Base();
    std::string d = dir;
    change.apply(c, d);
    CacheDirKey changed = KeyFor(vllm, d, c);
    EXPECT_NE(changed.digest, base.digest) << change.what;
    EXPECT_EQ(changed.FirstDifference(base), change.what);
  }
}

TEST(CacheDirKeyTest, WhatDoesNotDecideTheFilesLeavesTheKeyAlone) {
  const CacheDirSpec& vllm = Known("vllm");
  CacheDirKey base = KeyFor(vllm, "/home/u/.cache/vllm", Base());
  CacheDirContext c = Base();
  c.sms = {"8.6", "9.0", "8.6"};             // the same set
  c.env["TRITON_CACHE_DIR"] = "/elsewhere";  // another library's
  c.env["VLLM_CACHE_ROOT"] = "/srv/vllm";    // where vLLM's own directory is
  c.env["HOME"] = "/home/other";
  c.driver = "13020";  // vLLM's files hold no PTX for the driver
  c.versions["triton"] = "3.7.0";
  CacheDirKey same = KeyFor(vllm, "/srv/vllm", c);
  EXPECT_EQ(same.digest, base.digest) << same.FirstDifference(base);
  EXPECT_EQ(same.FirstDifference(base), "");
}

TEST(CacheDirKeyTest, TheDriverAndThePathAreKeyedWhereTheRowSaysSo) {
  CacheDirContext other_driver = Base();
  other_driver.driver = "13020";
  const CacheDirSpec& compute = Known("compute-cache");
  EXPECT_EQ(KeyFor(compute, "/c", other_driver).FirstDifference(KeyFor(compute, "/c", Base())),
            "driver");
  CacheDirContext no_driver = Base();
  no_driver.driver = "";
  EXPECT_NE(KeyFor(compute, "/c", no_driver).digest, KeyFor(compute, "/c", Base()).digest);
  const CacheDirSpec& triton = Known("triton");
  EXPECT_EQ(
      KeyFor(triton, "/b/triton", Base()).FirstDifference(KeyFor(triton, "/a/triton", Base())),
      "path")
      << "its group files name the directory";
  EXPECT_EQ(KeyFor(triton, "/a", Base()).digest, KeyFor(triton, "/a", other_driver).digest);
  CacheDirContext other_triton = Base();
  other_triton.versions["triton"] = "3.7.0";
  EXPECT_EQ(KeyFor(triton, "/a", other_triton).FirstDifference(KeyFor(triton, "/a", Base())),
            "version");
}

TEST(CacheDirKeyTest, ALibraryNotInstalledHasNoVersionAndTheFirstInstalledNameCounts) {
  CacheDirContext c = Base();
  const CacheDirSpec& cupy = Known("cupy");
  EXPECT_EQ(LibraryVersion(cupy, c), "");
  c.versions["cupy-cuda12x"] = "13.6.0";
  EXPECT_EQ(LibraryVersion(cupy, c), "13.6.0");
  c.versions["cupy-cuda13x"] = "14.0.0";
  EXPECT_EQ(LibraryVersion(cupy, c), "14.0.0");
}

TEST(CacheDirKeyTest, VersionsAreReadFromTheSiteDirectoriesOfPathsPython) {
  testing::TempDir tmp;
  namespace fs = std::filesystem;
  fs::path venv = tmp / "venv";
  fs::create_directories(venv / "bin");
  std::ofstream(venv / "bin/python3") << "";
  fs::path site = venv / "lib/python3.11/site-packages";
  fs::create_directories(site / "torch-2.15.0.dist-info");
  fs::create_directories(site / "flashinfer_python-0.6.18.dist-info");
  fs::create_directories(site / "torch");  // a package, not a distribution's record
  fs::path extra = tmp / "extra";
  fs::create_directories(extra / "torch-2.0.0.dist-info");
  Environment env = {{"PATH", "/nonexistent:" + (venv / "bin").string()},
                     {"PYTHONPATH", extra.string()}};
  std::vector<std::string> dirs = SiteDirectories(env);
  ASSERT_EQ(dirs, (std::vector<std::string>{extra.string(), site.string()}));
  std::map<std::string, std::string> versions = InstalledVersions(dirs);
  EXPECT_EQ(versions["torch"], "2.0.0") << "PYTHONPATH's comes first, as Python imports it";
  EXPECT_EQ(versions["flashinfer-python"], "0.6.18");
  EXPECT_EQ(versions.count("torch-2.15.0"), 0u);
  EXPECT_EQ(NormalizedDistribution("Flash_Infer..python"), "flash-infer-python");
  EXPECT_TRUE(SiteDirectories({{"PATH", "/nonexistent"}}).empty());
}

TEST(CacheDirKeyTest, AToolkitIsItsReleaseAndItsCompilersBytes) {
  testing::TempDir tmp;
  namespace fs = std::filesystem;
  fs::path root = tmp / "cuda";
  EXPECT_EQ(ToolkitIdentity(root.string()), "") << "no nvcc: no toolkit";
  fs::create_directories(root / "bin");
  fs::create_directories(root / "include");
  std::ofstream(root / "include/cuda.h") << "/* the header */\n#define CUDA_VERSION 13020\n";
  std::ofstream(root / "bin/nvcc") << "nvcc one";
  std::ofstream(root / "bin/ptxas") << "ptxas one";
  std::string one = ToolkitIdentity(root.string());
  EXPECT_EQ(one.substr(0, 10), "13.2 nvcc ") << one;
  std::ofstream(root / "bin/ptxas") << "ptxas two";
  std::string two = ToolkitIdentity(root.string());
  EXPECT_NE(two, one) << "another ptxas of the same release";
  std::ofstream(root / "bin/nvcc") << "nvcc two";
  EXPECT_NE(ToolkitIdentity(root.string()), two);
}

}  // namespace
}  // namespace kcache::cache_dirs
