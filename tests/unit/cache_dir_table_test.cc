// The table of inference libraries' JIT cache directories (engine/cache_dirs/cache_dirs.yaml):
// the built-in one parses and names every library kcache promises; where each directory is
// for an environment (variables, defaults, ~ and ${NAME:-fallback}); a user's own directory;
// the files never captured; and a table that is wrong says where.
#include "engine/cache_dirs/cache_dir_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "engine/cache_dirs/cache_dirs_yaml.h"
#include "tests/testutil/cache_dirs.h"

namespace kcache::cache_dirs {
namespace {

const CacheDirSpec& Known(const std::string& name) { return testing::KnownRow(name); }

TEST(CacheDirTableTest, TheBuiltInTableParsesAndHasEveryLibrary) {
  absl::StatusOr<std::vector<CacheDirSpec>> parsed = ParseCacheDirTable(kCacheDirsYaml);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), KnownCacheDirs().size());
  std::set<std::string> names;
  for (const CacheDirSpec& spec : KnownCacheDirs()) {
    names.insert(spec.name);
    EXPECT_FALSE(spec.variables.empty()) << spec.name;
    EXPECT_FALSE(spec.misses.empty()) << spec.name;
  }
  for (const char* name : {"vllm", "inductor", "triton", "flashinfer", "deepgemm", "sglang",
                           "tvm-ffi", "cute-dsl", "tilelang", "warp", "compute-cache"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  EXPECT_TRUE(Known("compute-cache").Keys(KeyPart::kDriver));
  EXPECT_TRUE(Known("vllm").Keys(KeyPart::kCommandLine));
  EXPECT_TRUE(Known("triton").Keys(KeyPart::kPath)) << "its group files name absolute paths";
  EXPECT_TRUE(Known("cute-dsl").at_exit);
}

TEST(CacheDirTableTest, ADirectoryIsItsVariablesElseItsDefault) {
  Environment env = {{"HOME", "/home/u"}};
  EXPECT_EQ(*ResolveCacheDir(Known("triton"), env), "/home/u/.triton/cache");
  env["TRITON_HOME"] = "/data";
  EXPECT_EQ(*ResolveCacheDir(Known("triton"), env), "/data/.triton/cache");
  env["TRITON_CACHE_DIR"] = "/cache/triton/";
  EXPECT_EQ(*ResolveCacheDir(Known("triton"), env), "/cache/triton");
  EXPECT_EQ(*ResolveCacheDir(Known("vllm"), env), "/home/u/.cache/vllm");
  env["XDG_CACHE_HOME"] = "/xdg";
  EXPECT_EQ(*ResolveCacheDir(Known("vllm"), env), "/xdg/vllm");
  EXPECT_EQ(*ResolveCacheDir(Known("flashinfer"), env), "/home/u/.cache/flashinfer");
  env["FLASHINFER_WORKSPACE_BASE"] = "/ws";
  EXPECT_EQ(*ResolveCacheDir(Known("flashinfer"), env), "/ws/.cache/flashinfer");
  EXPECT_EQ(*ResolveCacheDir(Known("sglang"), env), "/home/u/.cache/sglang/jit");
  EXPECT_EQ(*ResolveCacheDir(Known("cute-dsl"), env), "/tmp/root/cutlass_python_cache");
  env["USER"] = "ann";
  env["TMPDIR"] = "/scratch";
  EXPECT_EQ(*ResolveCacheDir(Known("cute-dsl"), env), "/scratch/ann/cutlass_python_cache");
  EXPECT_EQ(*ResolveCacheDir(Known("inductor"), env), "/scratch/torchinductor_ann");
}

TEST(CacheDirTableTest, ADirectoryThatCannotBeSaidIsAnErrorNamingWhatIsMissing) {
  absl::StatusOr<std::string> dir = ResolveCacheDir(Known("triton"), {});
  ASSERT_FALSE(dir.ok());
  EXPECT_TRUE(absl::StrContains(dir.status().message(), "$HOME is not set")) << dir.status();
  EXPECT_TRUE(absl::StrContains(dir.status().message(), "TRITON_CACHE_DIR")) << dir.status();
  EXPECT_FALSE(ResolveCacheDir(Known("triton"), {{"TRITON_CACHE_DIR", "relative/dir"}}).ok());
}

TEST(CacheDirTableTest, PathsExpandNestedFallbacksAndRefuseUnterminatedOnes) {
  Environment env = {{"A", "/a"}, {"HOME", "/h"}};
  EXPECT_EQ(*ExpandPath("${B:-${A}/x}/y", env), "/a/x/y");
  EXPECT_EQ(*ExpandPath("$A/z", env), "/a/z");
  EXPECT_EQ(*ExpandPath("~/c", env), "/h/c");
  EXPECT_EQ(*ExpandPath("${B:-~}/d", env), "/h/d");
  EXPECT_EQ(*ExpandPath("/x~", env), "/x~") << "~ only leads a path or a fallback";
  EXPECT_EQ(ExpandPath("${A", env).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpandPath("${B:-x", env).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpandPath("$B/q", env).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CacheDirTableTest, LocksTemporariesAndStagingAreLeftOut) {
  EXPECT_TRUE(LeftOut(Known("triton"), "ab12/tmp.pid_7_x/kernel.cubin"));
  EXPECT_FALSE(LeftOut(Known("triton"), "ab12/kernel.cubin"));
  EXPECT_TRUE(LeftOut(Known("deepgemm"), "tmp/1234/kernel.cubin"));
  EXPECT_FALSE(LeftOut(Known("deepgemm"), "cache/kernel.gemm.ab/kernel.cubin"));
  EXPECT_TRUE(LeftOut(Known("tvm-ffi"), "mod_ab12/lock"));
}

TEST(CacheDirTableTest, AUsersDirectoryIsKeyedByItsPathAndPrefixes) {
  absl::StatusOr<CacheDirSpec> mine = ParseUserCacheDir("my-jit=/opt/jit:MYJIT_,OTHER_");
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_TRUE(mine->user_added);
  EXPECT_EQ(*ResolveCacheDir(*mine, {}), "/opt/jit");
  EXPECT_EQ(mine->prefixes, (std::vector<std::string>{"MYJIT_", "OTHER_"}));
  EXPECT_TRUE(mine->Keys(KeyPart::kPath));
  EXPECT_TRUE(ParseUserCacheDir("plain=/opt/p").ok());
  for (const char* bad : {"=/opt/x", "Bad=/x", "mine=relative", "triton=/opt/t", "noequals"}) {
    EXPECT_EQ(ParseUserCacheDir(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CacheDirTableTest, AWrongTableSaysWhichRowAndField) {
  auto error = [](const char* yaml) {
    return std::string(ParseCacheDirTable(yaml).status().message());
  };
  EXPECT_TRUE(absl::StrContains(error("- name: a\n  default: /x\n  keys: [sm]\n"), "row 1 (a)"));
  EXPECT_TRUE(absl::StrContains(error("- name: a\n  default: /x\n  keys: [sm]\n"), "'sm'"));
  EXPECT_TRUE(absl::StrContains(error("- name: a\n"), "default"));
  EXPECT_TRUE(absl::StrContains(error("- name: a\n  default: /x\n- name: a\n  default: /y\n"),
                                "named twice"));
  EXPECT_TRUE(absl::StrContains(error("- name: a\n  default: /x\n  variables: X\n"), "lists"));
  EXPECT_TRUE(absl::StrContains(error("{a: 1}"), "not a list"));
  EXPECT_TRUE(ParseCacheDirTable("- name: a\n  default: /x\n").ok());
}

}  // namespace
}  // namespace kcache::cache_dirs
