// NVRTC compiles served by kcache (client/nvrtc/nvrtc_cache.cc, docs/nvrtc-standin.md): a
// program compiling with NVRTC under `kcache run --server` (a real kcached on a temp socket)
// stores each compile, and the next process is served every one of them, its PTX, CUBIN, log and
// lowered names byte for byte what the real NVRTC gave; what must miss misses (a header read
// changed, a header appearing in a directory searched first, an option, NVRTC_APPEND_FLAGS,
// another NVRTC), and so does a program whose output could depend on the clock or, named in a
// directory, on its name, however it spells the macro; with kcached stopped or hung the compile
// still succeeds; a damaged entry is a miss.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
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

  // `source` compiled under kcache by nvrtc_linked_program's `source` mode as a program named
  // `name`, each of `args` an option, --header= or --expr= (nvrtc_program.c); its PTX and log in
  // tmp_/tag.
  RunResult CompiledSource(const std::string& tag, const std::string& name,
                           const std::string& source, const std::vector<std::string>& args = {},
                           const std::string& assignments = "") {
    std::string command =
        absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"), " source ", Dir(tag).string(),
                     " ", Quoted(name), " ", tmp_.Write(tag + "/k.src", source));
    for (const std::string& arg : args) absl::StrAppend(&command, " ", Quoted(arg));
    return UnderKcache(command, assignments);
  }

  // `text` as one word for the shell.
  static std::string Quoted(const std::string& text) {
    return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
  }

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

// `kcache run --store DIR`, no kcached (an image build): the first process's compiles are stored
// in the directory and the second process is served them from it (`kcache nvrtc-get`), byte for
// byte; an unreadable store is a miss, not an error.
TEST_F(NvrtcCacheTest, SecondProcessUnderAStoreDirectoryIsServedFromIt) {
  auto under_store = [&](const std::string& tag, const std::string& store) {
    return testing::Run(absl::StrCat(
        "env ", testing::UnsetRoutedVariables(), "KCACHE_LOG=1 KCACHE_STATE_DIR=", tmp_ / "state",
        " ", KcacheCli(), " run --store ", store, " --shims ", tmp_ / "shims", " -- ",
        testing::NvrtcProgram("nvrtc_linked_program"), " compile ", Dir(tag).string()));
  };
  std::string store = tmp_ / "store";
  fs::path runs = tmp_.path();
  RunResult direct = WithoutKcache(absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                                " compile ", Dir("direct").string()));
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  RunResult first = under_store("first", store);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(Occurrences(first.output, kForwarded), 2) << first.output;
  EXPECT_EQ(Occurrences(first.output, kStored), 2) << first.output;
  RunResult second = under_store("second", store);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(Occurrences(second.output, kServed), 2) << second.output;
  EXPECT_EQ(Occurrences(second.output, kForwarded), 0) << second.output;
  for (const char* file : {"ptx", "cubin", "log", "names", "nulls"}) {
    EXPECT_EQ(ReadFile(runs / "second" / file), ReadFile(runs / "direct" / file)) << file;
  }
  // A store that is not one: every compile forwarded, the program's outputs as without kcache.
  std::string not_a_store = tmp_.Write("not-a-store", "plain file");
  RunResult broken = under_store("broken", not_a_store);
  ASSERT_EQ(broken.exit_code, 0) << broken.output;
  EXPECT_EQ(Occurrences(broken.output, kForwarded), 2) << broken.output;
  EXPECT_EQ(ReadFile(runs / "broken" / "ptx"), ReadFile(runs / "direct" / "ptx"));
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

// Sources for the tests of what a program can reach however it spells it: a kernel storing one
// int (`kKernel` and the expression, then "; }"), and MK(a, b), which pastes its arguments once
// expanded.
const std::string kPaste = "#define CAT(a, b) a##b\n#define MK(a, b) CAT(a, b)\n";
const std::string kKernel = "extern \"C\" __global__ void k(int* o) { o[0] = ";
// One way to write it: `source` compiled with `args`.
struct Form {
  const char* what;
  std::string source;
  std::vector<std::string> args;
};

// Pasting the macro from pieces, splicing its name across lines (with a trigraph too), an option,
// a header in memory, a header on disk, a stringizing macro, a name expression: however a program
// reaches __DATE__ or __TIME__, its outcome is not stored (kcache nvrtc-put compiled it again
// under another date, and NVRTC could not lex what the macro gave), so the next process compiles
// its own. A program that pastes other names, and names __TIME__ only in a comment, is stored and
// served: nothing is decided by spelling.
TEST_F(NvrtcCacheTest, ClockReachingTheOutputIsNeverStored) {
  constexpr const char* kClock = "not stored: the output depends on the clock";
  fs::path disk = Dir("disk");
  std::ofstream(disk / "when.h") << kPaste << "#define WHEN MK(__TI, ME__)\n";
  std::string memory = tmp_.Write("when_in_memory.h", kPaste + "#define WHEN MK(__DA, TE__)\n");
  const std::vector<Form> forms = {
      {"spelled", kKernel + "__TIME__[7]; }\n", {}},
      {"pasted", kPaste + kKernel + "MK(__TI, ME__)[7]; }\n", {}},
      {"__DATE__ pasted", kPaste + kKernel + "MK(MK(__D, A), TE__)[5]; }\n", {}},
      {"spliced", kKernel + "__TI\\\nME__[7]; }\n", {}},
      {"spliced by a trigraph",
       kKernel + "__TI?"
                 "?/\nME__[7]; }\n",
       {"-std=c++11"}},
      {"a piece in an option", kPaste + kKernel + "MK(PIECE, ME__)[7]; }\n", {"-DPIECE=__TI"}},
      {"the whole macro in an option", kKernel + "WHEN[7]; }\n", {"-DWHEN=__TIME__"}},
      {"a header in memory",
       "#include \"when.h\"\n" + kKernel + "WHEN[5]; }\n",
       {absl::StrCat("--header=when.h=", memory)}},
      {"a header on disk",
       "#include \"when.h\"\n" + kKernel + "WHEN[7]; }\n",
       {absl::StrCat("-I", disk.string())}},
      {"stringized",
       kPaste + "#define S(x) #x\n#define S2(x) S(x)\n" + kKernel + "S2(MK(__TI, ME__))[2]; }\n",
       {}},
      {"a name expression",
       kPaste + "template <int N> __global__ void t(int* o) { o[0] = N; }\n",
       {"--expr=t<MK(__TI, ME__)[7]>"}},
  };
  int n = 0;
  for (const Form& form : forms) {
    SCOPED_TRACE(form.what);
    std::vector<std::string> args = form.args;
    args.push_back("-arch=compute_89");
    std::string tag = absl::StrCat("clock", n++);
    RunResult first = CompiledSource(tag + "a", "k.cu", form.source, args);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_EQ(Occurrences(first.output, kClock), 1) << first.output;
    EXPECT_EQ(Occurrences(first.output, kStored), 0) << first.output;
    RunResult second = CompiledSource(tag + "b", "k.cu", form.source, args);
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_EQ(Occurrences(second.output, kServed), 0) << second.output;
    EXPECT_EQ(Occurrences(second.output, kForwarded), 1) << second.output;
  }

  const std::string timeless = kPaste + "// __TIME__, __DATE__: named here only\n" + kKernel +
                               "MK(4, 2) + sizeof(\"__TIME__\"); }\n";
  RunResult first = CompiledSource("timeless_a", "k.cu", timeless, {"-arch=compute_89"});
  EXPECT_EQ(Occurrences(first.output, kStored), 1) << first.output;
  RunResult second = CompiledSource("timeless_b", "k.cu", timeless, {"-arch=compute_89"});
  EXPECT_EQ(Occurrences(second.output, kServed), 1) << second.output;
  EXPECT_EQ(ReadFile(tmp_ / "timeless_b/ptx"), ReadFile(tmp_ / "timeless_a/ptx"));
}

// A program named in a directory that could see its name (__FILE__ or __BASE_FILE__, spelled,
// pasted from pieces, spliced, in a header, an option, assert stringized) is stored for its name
// only, so the same source named in another directory is compiled, not served the first one's:
// sizeof(__FILE__) > 16, stored from a long directory, is 222 named v/k.cu. A program that cannot
// see its name is stored for any directory, its probes made under /tmp whatever $TMPDIR says.
TEST_F(NvrtcCacheTest, ProgramThatCouldSeeItsNameIsNotStoredForAnyDirectory) {
  constexpr const char* kCouldSee = "for its program's name only: the program could see its name";
  constexpr const char* kAnyDirectory = "for its program's name in any directory";
  fs::path disk = Dir("disk");
  std::ofstream(disk / "name.h") << "#define NAME_LENGTH sizeof(__BASE_FILE__)\n";
  std::string memory = tmp_.Write("name_in_memory.h", kPaste + "#define NAME MK(__FI, LE__)\n");
  const std::vector<Form> forms = {
      {"the length of __FILE__", kKernel + "sizeof(__FILE__) > 16 ? 111 : 222; }\n", {}},
      {"pasted", kPaste + kKernel + "sizeof(MK(__FI, LE__)) > 16 ? 111 : 222; }\n", {}},
      {"pasted from letters",
       kPaste + kKernel +
           "sizeof(MK(MK(MK(_, _), MK(F, I)), MK(MK(L, E), MK(_, _)))) > "
           "16 ? 111 : 222; }\n",
       {}},
      {"__BASE_FILE__", kKernel + "sizeof(__BASE_FILE__) > 16 ? 111 : 222; }\n", {}},
      {"spliced", kKernel + "sizeof(__FI\\\nLE__) > 16 ? 111 : 222; }\n", {}},
      {"assert stringized",
       "#define S(x) #x\n#define S2(x) S(x)\n" + kKernel +
           "sizeof(S2(assert(1))) > 90 ? 1 : 2; }\n",
       {}},
      {"a header on disk",
       "#include <name.h>\n" + kKernel + "NAME_LENGTH > 16 ? 111 : 222; }\n",
       {absl::StrCat("-I", disk.string())}},
      {"a header in memory",
       "#include <name.h>\n" + kKernel + "sizeof(NAME) > 16 ? 111 : 222; }\n",
       {absl::StrCat("--header=name.h=", memory)}},
      {"a piece in an option",
       kPaste + kKernel + "sizeof(MK(PIECE, LE__)) > 16 ? 111 : 222; }\n",
       {"-DPIECE=__FI"}},
  };
  const std::string long_directory = tmp_ / "a-directory-long-enough-for-sixteen";
  int n = 0;
  for (const Form& form : forms) {
    SCOPED_TRACE(form.what);
    std::vector<std::string> args = form.args;
    args.push_back("-arch=compute_89");
    std::string tag = absl::StrCat("name", n++);
    RunResult first = CompiledSource(tag + "a", long_directory + "/k.cu", form.source, args);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_EQ(Occurrences(first.output, kCouldSee), 1) << first.output;
    EXPECT_EQ(Occurrences(first.output, kAnyDirectory), 0) << first.output;
    RunResult second = CompiledSource(tag + "b", "v/k.cu", form.source, args);
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_EQ(Occurrences(second.output, kServed), 0) << second.output;
    if (n == 1) {
      EXPECT_TRUE(Contains(ReadFile(tmp_ / (tag + "a/ptx")), "111"));
      EXPECT_TRUE(Contains(ReadFile(tmp_ / (tag + "b/ptx")), "222"));
    }
  }

  const std::string blind = kKernel + "42; }\n";
  RunResult first = CompiledSource("blind_a", long_directory + "/k.cu", blind, {"-arch=compute_89"},
                                   "TMPDIR=/nonexistent");
  EXPECT_EQ(Occurrences(first.output, kAnyDirectory), 1) << first.output;
  RunResult second = CompiledSource("blind_b", "v/k.cu", blind, {"-arch=compute_89"});
  EXPECT_EQ(Occurrences(second.output, kServed), 1) << second.output;
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

// `kcache ls --server` lists a stored NVRTC compile as a compiler output, not as a kernel.
TEST_F(NvrtcCacheTest, LsListsAStoredCompileAsACompilerOutputNotAKernel) {
  EXPECT_EQ(CompiledIncludes(IncludeDirs()), 1);
  RunResult ls = testing::Run(absl::StrCat(KcacheCli(), " ls --server ", daemon_.address()));
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_TRUE(Contains(ls.output, "0 kernels, 0 artifacts")) << ls.output;
  EXPECT_TRUE(Contains(ls.output, "1 compiler outputs")) << ls.output;
  EXPECT_TRUE(Contains(ls.output, "fill.cu")) << ls.output;
}

// A program named in a directory that still exists when it is stored (not removed first, as
// CuPy's is): NVRTC looked at nothing there, so it is stored for its name in any directory and
// served to a program of that name in another existing directory, byte for byte.
TEST_F(NvrtcCacheTest, ProgramNamedInADirectoryThatStillExistsIsStoredForAnyDirectory) {
  const std::string source =
      "extern \"C\" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  RunResult first =
      CompiledSource("first", (Dir("first") / "twice.cu").string(), source, {"-arch=compute_89"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(Occurrences(first.output, "for its program's name in any directory"), 1)
      << first.output;
  RunResult second =
      CompiledSource("second", (Dir("second") / "twice.cu").string(), source, {"-arch=compute_89"});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(Occurrences(second.output, kServed), 1) << second.output;
  EXPECT_EQ(ReadFile(tmp_ / "second/ptx"), ReadFile(tmp_ / "first/ptx"));
}

// A program that includes the toolkit's headers by $CUDA_HOME (CCCL's, as a CUB program does),
// under `kcache run` with its default shims directory: compiled under one user's state
// directory and HOME, it is served to another user's, byte for byte (KCACHE_SHIMS_DIR keys the
// shim toolkit's paths as "@shims@").
TEST_F(NvrtcCacheTest, AnotherUsersStateDirectoryIsServedItsToolkitIncludes) {
  const std::string source =
      "#include <cuda/std/cstdint>\n"
      "extern \"C\" __global__ void count(cuda::std::uint32_t* x) { x[threadIdx.x] += 1u; }\n";
  auto compiled = [&](const std::string& user) {
    return testing::Run(absl::StrCat(
        "env ", testing::UnsetRoutedVariables(), "KCACHE_LOG=1 KCACHE_STATE_DIR=",
        tmp_ / (user + "-state"), " HOME=", tmp_ / (user + "-home"), " ", KcacheCli(),
        " run --server ", daemon_.address(), " -- sh -c \"",
        testing::NvrtcProgram("nvrtc_linked_program"), " source ", Dir(user).string(), " count.cu ",
        tmp_.Write(user + "/k.src", source), " -I\\$CUDA_HOME/include/cccl -arch=compute_89\""));
  };
  RunResult image = compiled("image");
  ASSERT_EQ(image.exit_code, 0) << image.output;
  ASSERT_EQ(Occurrences(image.output, kStored), 1) << image.output;
  RunResult pod = compiled("pod");
  ASSERT_EQ(pod.exit_code, 0) << pod.output;
  EXPECT_EQ(Occurrences(pod.output, kServed), 1) << pod.output;
  EXPECT_EQ(Occurrences(pod.output, kForwarded), 0) << pod.output;
  EXPECT_EQ(ReadFile(tmp_ / "pod/ptx"), ReadFile(tmp_ / "image/ptx"));
  EXPECT_TRUE(Contains(ReadFile(tmp_ / "pod/ptx"), "count")) << ReadFile(tmp_ / "pod/ptx");
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
