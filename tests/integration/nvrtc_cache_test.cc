// NVRTC compiles served by kcache (client/nvrtc/nvrtc_cache.cc, docs/nvrtc-standin.md): a
// program compiling with NVRTC under `kcache run --server` (a real kcached on a temp socket)
// stores each compile, and the next process is served every one of them, its PTX, CUBIN, log and
// lowered names byte for byte what the real NVRTC gave; what must miss misses (a header read
// changed, a header appearing in a directory searched first, an option, NVRTC_APPEND_FLAGS,
// another NVRTC); with kcached stopped or hung the compile still succeeds; a damaged entry is a
// miss.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/object_remote.h"
#include "engine/objects/object_bundle.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_run.h"
#include "tests/testutil/nvrtc_programs.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::KcacheCli;
using testing::Occurrences;
using testing::RunResult;

constexpr const char* kServed = testing::kNvrtcServed;
constexpr const char* kForwarded = testing::kNvrtcForwarded;
constexpr const char* kStored = testing::kNvrtcStored;

std::string NvrtcDir() { return (fs::path(KcacheCli()).parent_path() / "nvrtc").string(); }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

class NvrtcCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(NvrtcDir()) / "libkcache-nvrtc.so")) {
      GTEST_SKIP() << "no libkcache-nvrtc.so in " << NvrtcDir() << " (a sanitizer build)";
    }
    if (!fs::exists("/usr/local/cuda/lib64/libnvrtc.so.13")) GTEST_SKIP() << "no NVRTC 13";
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
  }

  // `command` under `kcache run --server` (KCACHE_LOG=1), `assignments` before it.
  RunResult UnderKcache(const std::string& command, const std::string& assignments = "") {
    return testing::Run(absl::StrCat(
        "env ", testing::UnsetRoutedVariables(), "KCACHE_LOG=1 KCACHE_STATE_DIR=", tmp_ / "state",
        " ", assignments, " ", KcacheCli(), " run --server ", daemon_.address(), " --shims ",
        tmp_ / "shims", " -- ", command));
  }

  // `command` without kcache (none of the variables `kcache run` sets), loading NVRTC `major`:
  // for 12, the 12.9 wheel's, its directory on LD_LIBRARY_PATH.
  static RunResult WithoutKcache(const std::string& command, int major = 13) {
    return testing::Run(absl::StrCat(
        "env ", testing::UnsetRoutedVariables(),
        major == 13 ? ""
                    : absl::StrCat("LD_LIBRARY_PATH=",
                                   fs::path(testing::WheelNvrtc12()).parent_path().string(), " "),
        command));
  }

  // What routes NVRTC `major` under kcache: for 12, KCACHE_REAL_NVRTC_12 naming the 12.9 wheel's
  // (kcache run finds the toolkit's 13 itself).
  static std::string RoutedNvrtc(int major) {
    return major == 13 ? "" : absl::StrCat("KCACHE_REAL_NVRTC_12=", testing::WheelNvrtc12());
  }

  fs::path Dir(const std::string& name) {
    fs::create_directories(tmp_ / name);
    return tmp_ / name;
  }

  fs::path IncludeDirs() { return testing::MakeIncludeDirs(Dir("inc")); }

  // Whether `includes` compiled (1) or was served (0) under kcache, with `assignments`, by
  // `program`. Fails the test when it neither did one compile nor succeeded.
  int CompiledIncludes(const fs::path& inc, const std::string& option = "",
                       const std::string& assignments = "",
                       const std::string& program = "nvrtc_linked_program") {
    RunResult run = UnderKcache(
        absl::StrCat(testing::NvrtcProgram(program), " includes ", inc.string(), " ", option),
        assignments);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    int served = Occurrences(run.output, kServed), forwarded = Occurrences(run.output, kForwarded);
    EXPECT_EQ(served + forwarded, 1) << run.output;
    return forwarded;
  }

  testing::TempDir tmp_;
  testing::DaemonProcess daemon_;
};

// Each of the program's two compiles is stored by the first process and served to the second,
// its outputs the real NVRTC's byte for byte (and a run without kcache's): NVRTC 13 linked and
// dlopened, NVRTC 12 (the 12.9 wheel's) dlopened through its own stand-in.
TEST_F(NvrtcCacheTest, SecondProcessIsServedEveryCompileByteForByte) {
  ASSERT_TRUE(fs::exists(testing::WheelNvrtc12()))
      << "no NVRTC 12.9 wheel: run scripts/install-deps.sh";
  for (const char* program :
       {"nvrtc_linked_program", "nvrtc_dlopen_program", "nvrtc12_dlopen_program"}) {
    SCOPED_TRACE(program);
    std::string tag = program;
    int major = tag == "nvrtc12_dlopen_program" ? 12 : 13;
    std::string routed = RoutedNvrtc(major);
    RunResult direct = WithoutKcache(
        absl::StrCat(testing::NvrtcProgram(program), " compile ", Dir(tag + "/direct").string()),
        major);
    ASSERT_EQ(direct.exit_code, 0) << direct.output;
    RunResult first = UnderKcache(
        absl::StrCat(testing::NvrtcProgram(program), " compile ", Dir(tag + "/first").string()),
        routed);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    RunResult second = UnderKcache(
        absl::StrCat(testing::NvrtcProgram(program), " compile ", Dir(tag + "/second").string()),
        routed);
    ASSERT_EQ(second.exit_code, 0) << second.output;
    if (tag == "nvrtc_linked_program") {
      EXPECT_EQ(Occurrences(first.output, kForwarded), 2) << first.output;
      EXPECT_EQ(Occurrences(first.output, kStored), 2) << first.output;
    }
    EXPECT_EQ(Occurrences(second.output, kServed), 2) << second.output;
    EXPECT_EQ(Occurrences(second.output, kForwarded), 0) << second.output;
    fs::path runs = fs::path(tmp_.path()) / tag;
    for (const char* file : {"ptx", "cubin", "log", "names", "nulls"}) {
      std::string expected = ReadFile(runs / "direct" / file);
      EXPECT_EQ(ReadFile(runs / "first" / file), expected) << file;
      EXPECT_EQ(ReadFile(runs / "second" / file), expected) << file;
    }
    EXPECT_TRUE(Contains(ReadFile(runs / "second/names"), "scale<float> _Z5scaleIf"));
  }
}

// A program named in a new directory in each process, as CuPy names its programs: the first
// process's compiles are stored for the name in any directory (NVRTC compiled them the same in
// another), and the next process, in another directory, is served them byte for byte (and as a
// run without kcache's). A program whose output holds its directory (__FILE__) is not, nor one
// that read a header beside it: each process compiles its own, and a header of another value
// beside the next one's is compiled in. The same with NVRTC 12.9.
TEST_F(NvrtcCacheTest, ProgramNamedInANewDirectoryIsServedWhenTheDirectoryIsNotInItsOutput) {
  constexpr const char* kAnyDirectory = "for its program's name in any directory";
  constexpr const char* kNameOnly = "for its program's name only";
  // NVRTC 13 (the toolkit's), or 12 (the 12.9 wheel's, through its stand-in).
  auto named = [&](const std::string& dir, const std::string& kind, bool under_kcache,
                   int major = 13) {
    std::string command = absl::StrCat(
        testing::NvrtcProgram(major == 13 ? "nvrtc_linked_program" : "nvrtc12_dlopen_program"),
        " named ", Dir(dir).string(), " ", kind);
    RunResult run =
        under_kcache ? UnderKcache(command, RoutedNvrtc(major)) : WithoutKcache(command, major);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return run;
  };
  // What a run's log says of its compiles: "forwarded F, served S, stored for any directory
  // A, for the name only N".
  auto said = [&](const RunResult& run) {
    return absl::StrCat("forwarded ", Occurrences(run.output, kForwarded), ", served ",
                        Occurrences(run.output, kServed), ", stored for any directory ",
                        Occurrences(run.output, kAnyDirectory), ", for the name only ",
                        Occurrences(run.output, kNameOnly));
  };
  RunResult direct = named("direct", "plain", false);
  RunResult first = named("first", "plain", true);
  EXPECT_EQ(said(first), "forwarded 2, served 0, stored for any directory 2, for the name only 0")
      << first.output;
  RunResult second = named("second", "plain", true);
  EXPECT_EQ(said(second), "forwarded 0, served 2, stored for any directory 0, for the name only 0")
      << second.output;
  for (const char* file : {"ptx", "cubin", "log", "names"}) {
    EXPECT_EQ(ReadFile(fs::path(tmp_ / "second") / file),
              ReadFile(fs::path(tmp_ / "direct") / file))
        << file;
  }

  RunResult file_first = named("file_first", "file", true);
  EXPECT_EQ(said(file_first),
            "forwarded 2, served 0, stored for any directory 0, for the name only 2")
      << file_first.output;
  RunResult file_second = named("file_second", "file", true);
  EXPECT_EQ(said(file_second),
            "forwarded 2, served 0, stored for any directory 0, for the name only 2")
      << file_second.output;
  EXPECT_NE(ReadFile(tmp_ / "file_second/ptx"), ReadFile(tmp_ / "file_first/ptx"))
      << "each holds its own directory";

  RunResult sibling_first = named("sibling_first", "sibling=3.0f", true);
  EXPECT_EQ(said(sibling_first),
            "forwarded 1, served 0, stored for any directory 0, for the name only 1")
      << sibling_first.output;
  EXPECT_TRUE(Contains(sibling_first.output, "hdr.h")) << sibling_first.output;
  RunResult sibling_second = named("sibling_second", "sibling=5.0f", true);
  EXPECT_EQ(said(sibling_second),
            "forwarded 1, served 0, stored for any directory 0, for the name only 1")
      << sibling_second.output;
  EXPECT_TRUE(Contains(ReadFile(tmp_ / "sibling_second/ptx"), "0f40A00000"))  // 5.0f
      << ReadFile(tmp_ / "sibling_second/ptx");

  // NVRTC 12.9: its second compile elsewhere is its own (nvrtc-put loads the NVRTC that compiled).
  named("direct12", "plain", false, 12);
  EXPECT_EQ(said(named("first12", "plain", true, 12)),
            "forwarded 2, served 0, stored for any directory 2, for the name only 0");
  EXPECT_EQ(said(named("second12", "plain", true, 12)),
            "forwarded 0, served 2, stored for any directory 0, for the name only 0");
  for (const char* file : {"ptx", "cubin", "log", "names"}) {
    EXPECT_EQ(ReadFile(fs::path(tmp_ / "second12") / file),
              ReadFile(fs::path(tmp_ / "direct12") / file))
        << file;
  }
  EXPECT_TRUE(Contains(ReadFile(tmp_ / "second12/ptx"), "release 12.9"));
  EXPECT_EQ(said(named("file12", "file", true, 12)),
            "forwarded 2, served 0, stored for any directory 0, for the name only 2");
}

// What must miss does: a change to the header read, a header of that name appearing in the
// directory searched first, another option, NVRTC_APPEND_FLAGS set, another NVRTC, another
// NVRTC version (12.9); and each variant is stored, so it hits the next time.
TEST_F(NvrtcCacheTest, MissesWhenWhatTheCompileReadOrWasGivenChanges) {
  fs::path inc = IncludeDirs();
  EXPECT_EQ(CompiledIncludes(inc), 1);
  EXPECT_EQ(CompiledIncludes(inc), 0);
  std::string served = ReadFile(inc / "ptx");

  std::ofstream(inc / "b/hdr.h") << "constexpr float kValue = 4.0f;\n";
  EXPECT_EQ(CompiledIncludes(inc), 1) << "the header read changed";
  EXPECT_NE(ReadFile(inc / "ptx"), served);
  EXPECT_EQ(CompiledIncludes(inc), 0);

  std::ofstream(inc / "a/hdr.h") << "constexpr float kValue = 5.0f;\n";
  EXPECT_EQ(CompiledIncludes(inc), 1) << "a header appeared in the directory searched first";
  EXPECT_TRUE(Contains(ReadFile(inc / "ptx"), "0f40A00000")) << ReadFile(inc / "ptx");  // 5.0f
  EXPECT_EQ(CompiledIncludes(inc), 0);

  EXPECT_EQ(CompiledIncludes(inc, "-DUNUSED=1"), 1) << "an option more";
  EXPECT_EQ(CompiledIncludes(inc, "-DUNUSED=1"), 0);
  EXPECT_EQ(CompiledIncludes(inc, "", "NVRTC_APPEND_FLAGS=-DUNUSED=2"), 1)
      << "NVRTC_APPEND_FLAGS, which NVRTC reads";

  fs::path wheel =
      testing::SourcePath(".venv/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13");
  if (fs::exists(wheel)) {
    EXPECT_EQ(CompiledIncludes(inc, "", absl::StrCat("KCACHE_REAL_NVRTC=", wheel.string())), 1)
        << "another NVRTC (the nvidia-cuda-nvrtc wheel's)";
    EXPECT_EQ(CompiledIncludes(inc, "", absl::StrCat("KCACHE_REAL_NVRTC=", wheel.string())), 0);
  }
  // Another NVRTC version: the NVRTC 12.9 wheel beside the toolkit's 13.0, the same program
  // through the libnvrtc.so.12 stand-in.
  std::string nvrtc12 = RoutedNvrtc(12);
  EXPECT_EQ(CompiledIncludes(inc, "", nvrtc12, "nvrtc12_dlopen_program"), 1) << "NVRTC 12.9";
  EXPECT_TRUE(Contains(ReadFile(inc / "ptx"), "release 12.9")) << ReadFile(inc / "ptx");
  EXPECT_EQ(CompiledIncludes(inc, "", nvrtc12, "nvrtc12_dlopen_program"), 0);
  EXPECT_EQ(CompiledIncludes(inc), 0) << "the first variant is still served";
  EXPECT_TRUE(Contains(ReadFile(inc / "ptx"), "release 13.0")) << ReadFile(inc / "ptx");
}

// An entry whose outcome does not decode (damaged, or put by a hostile client under the key) is
// a miss: the real NVRTC compiles, and the good outcome is stored over it.
TEST_F(NvrtcCacheTest, DamagedStoredEntryIsAMiss) {
  fs::path inc = IncludeDirs();
  EXPECT_EQ(CompiledIncludes(inc), 1);
  std::string good = ReadFile(inc / "ptx");
  absl::StatusOr<std::unique_ptr<objects::ObjectCache>> cache =
      cli::OpenRemoteObjectCache(daemon_.address());
  ASSERT_TRUE(cache.ok()) << cache.status();
  absl::StatusOr<std::vector<ObjectEntry>> all = (*cache)->ListAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  ObjectEntry entry = all->front();
  EXPECT_EQ(entry.source, "fill.cu");
  objects::ObjectBundle damaged;
  damaged.object = "kcache.nvrtc-outcome.v1\n\x01\x02 not an outcome";
  std::string bytes = objects::EncodeBundle(damaged);
  entry.size = bytes.size();
  ASSERT_TRUE((*cache)->Put(entry, bytes).ok());
  absl::StatusOr<std::string> stored = (*cache)->Get(entry.key);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(*stored, bytes);

  EXPECT_EQ(CompiledIncludes(inc), 1) << "a damaged entry is a miss";
  EXPECT_EQ(ReadFile(inc / "ptx"), good);
  EXPECT_EQ(CompiledIncludes(inc), 0) << "the good outcome was stored over it";
  EXPECT_EQ(ReadFile(inc / "ptx"), good);
}

// Sixteen threads compiling the same program at once, twice in new processes: the second is
// served every compile, each thread the same PTX.
TEST_F(NvrtcCacheTest, SixteenThreadsAreServedAtOnce) {
  RunResult first = UnderKcache(absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                             " threads 16 ", Dir("first").string()));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult second = UnderKcache(absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                              " threads 16 ", Dir("second").string()));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(Occurrences(second.output, kServed), 16) << second.output;
  EXPECT_EQ(ReadFile(tmp_ / "second/ptx"), ReadFile(tmp_ / "first/ptx"));
}

// Programs created and destroyed on 8 threads while 8 others compile (3 times each), twice in
// new processes: nothing crashes, the second is served every compile, every PTX the same.
TEST_F(NvrtcCacheTest, ProgramsDestroyedWhileOthersCompile) {
  RunResult first = UnderKcache(absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                             " churn ", Dir("first").string()));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult second = UnderKcache(absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                              " churn ", Dir("second").string()));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(Occurrences(second.output, kServed), 24) << second.output;
  EXPECT_EQ(ReadFile(tmp_ / "second/ptx"), ReadFile(tmp_ / "first/ptx"));
}

// kcached hung (SIGSTOP) or gone: the compile succeeds, compiled by the real NVRTC, and the
// process is not held for more than the lookup budget per compile.
TEST_F(NvrtcCacheTest, KcachedHungOrGoneTheCompileStillSucceeds) {
  ASSERT_TRUE(daemon_.Pause());
  auto started = std::chrono::steady_clock::now();
  RunResult hung = UnderKcache(absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                            " compile ", Dir("hung").string()),
                               "KCACHE_TIMEOUT_MS=2000");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  daemon_.Kill(SIGCONT);
  ASSERT_EQ(hung.exit_code, 0) << hung.output;
  EXPECT_EQ(Occurrences(hung.output, kForwarded), 2) << hung.output;
  // Two lookups of 50 ms each and the stores' puts (which wait on kcached, bounded by
  // KCACHE_TIMEOUT_MS): far below what a hang would take.
  EXPECT_LT(seconds, 30) << hung.output;

  daemon_.Kill(SIGKILL);
  daemon_.Wait(std::chrono::seconds(10));
  RunResult gone = UnderKcache(absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                            " compile ", Dir("gone").string()));
  ASSERT_EQ(gone.exit_code, 0) << gone.output;
  EXPECT_EQ(Occurrences(gone.output, kForwarded), 2) << gone.output;
  EXPECT_EQ(ReadFile(tmp_ / "gone/ptx"), ReadFile(tmp_ / "hung/ptx"));
}

}  // namespace
}  // namespace kcache
