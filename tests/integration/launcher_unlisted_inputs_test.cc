// What a compile reads that its command line names nowhere a parser could see, each tried
// against the real compilers: record a compile through the launcher (a store directory), change
// that input, compile again: the second must not be a hit that serves the first object (a miss
// or uncached), and its object must be the real compiler's. (The launcher keys what it observed
// the compile read: engine/keys/observed_manifest.h.)
// Also what a hit writes for make: its dependency file names this command's output.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::LauncherEnv;
using testing::Outcome;
using testing::ReadAll;
using testing::RunIn;

constexpr char kNvcc[] = "/usr/local/cuda/bin/nvcc";

// nvcc writes the name of its temporaries (tmpxft_<pid>_<n>) into the object: two real
// compiles differ there and nowhere else.
std::string MaskTemporaryNames(const std::string& object) {
  static const std::regex kTemporary("tmpxft_[0-9a-f]{8}_[0-9a-f]{8}");
  return std::regex_replace(object, kTemporary, "tmpxft_XXXXXXXX_XXXXXXXX");
}

// A dependency file's words: targets, prerequisites and phony targets, in order, however the
// lines are broken.
std::vector<std::string> DependencyWords(const std::string& text) {
  std::string joined = absl::StrReplaceAll(text, {{"\\\n", " "}, {" :", ":"}});
  return absl::StrSplit(joined, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

class LauncherUnlistedInputsTest : public testing::LauncherTest {
 protected:
  // Runs `command` (naming the launcher: "$KCACHE c++ ...") in tmp_/dir, expecting the launcher
  // not to serve a recorded object, then the real compiler with the same arguments and
  // environment in the same directory; the two objects at `object` must be the same (for nvcc
  // after MaskTemporaryNames).
  void ExpectNotServedStale(const std::string& dir, const std::string& command,
                            const std::string& object, const LauncherEnv* env = nullptr) {
    Outcome outcome = Build(dir, command, env);
    EXPECT_NE(outcome, Outcome::kHit) << "served the object recorded before: " << last_output_;
    std::string launched = ReadAll(tmp_ / (dir + "/" + object));
    bool nvcc = command.find("$KCACHE nvcc") != std::string::npos;
    std::string real = absl::StrReplaceAll(
        command,
        {{"$KCACHE nvcc ", absl::StrCat(kNvcc, " ")}, {"$KCACHE_LAUNCH ", ""}, {"$KCACHE ", ""}});
    testing::RunResult result = RunIn(tmp_ / dir, env ? *env : env_, real);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::string compiled = ReadAll(tmp_ / (dir + "/" + object));
    ASSERT_FALSE(compiled.empty());
    if (nvcc) {
      EXPECT_TRUE(MaskTemporaryNames(launched) == MaskTemporaryNames(compiled))
          << object << " differs from the real nvcc's";
    } else {
      EXPECT_TRUE(launched == compiled) << object << " differs from the real compiler's";
    }
  }

  static bool HaveNvcc() { return fs::exists(kNvcc); }
};

// gcc reads `-D @defs` as `-D` and the contents of defs: a response file as an option's value.
// Through kcache and through kcache-launch (the masquerade links), which share the parser.
TEST_F(LauncherUnlistedInputsTest, ResponseFileAsAnOptionsValue) {
  std::string src = tmp_.Write("src/answer.cpp", "int answer() { return ANSWER; }\n");
  std::string defs = tmp_.Write("src/defs", "ANSWER=1\n");
  int answer = 0;  // values neither launcher recorded before: each second build must miss
  for (const char* launcher : {"kcache", "kcache-launch"}) {
    std::string command =
        absl::StrCat(launcher == std::string("kcache") ? "$KCACHE" : "$KCACHE_LAUNCH",
                     " c++ -MD -MF a.o.d -D @", defs, " -c ", src, " -o a.o");
    tmp_.Write("src/defs", absl::StrCat("ANSWER=", ++answer, "\n"));
    Build(absl::StrCat(launcher, "/b1"), command);
    tmp_.Write("src/defs", absl::StrCat("ANSWER=", ++answer, "\n"));
    ExpectNotServedStale(absl::StrCat(launcher, "/b2"), command, "a.o");
  }
}

// The assembler reads what .incbin and .include name; no dependency output lists them.
TEST_F(LauncherUnlistedInputsTest, FilesTheAssemblerReads) {
  std::string blob = tmp_.Write("src/blob.bin", "first");
  tmp_.Write("src/blob.h",
             absl::StrCat("asm(\".section .rodata\\n.incbin \\\"", blob, "\\\"\\n.text\");\n"));
  std::string src = tmp_.Write("src/embed.cpp", "#include \"blob.h\"\nint f() { return 1; }\n");
  std::string command = absl::StrCat("$KCACHE c++ -MD -MF e.o.d -c ", src, " -o e.o");
  Build("b1", command);
  tmp_.Write("src/blob.bin", "other");
  ExpectNotServedStale("b2", command, "e.o");
  // An assembler source: `.include` in it, through -x assembler-with-cpp.
  std::string included = tmp_.Write("src/values.s", ".byte 1\n");
  std::string asm_source =
      tmp_.Write("src/data.S", absl::StrCat(".section .rodata\n.include \"", included, "\"\n"));
  std::string assemble =
      absl::StrCat("$KCACHE cc -x assembler-with-cpp -c ", asm_source, " -o d.o");
  Build("b3", assemble);
  tmp_.Write("src/values.s", ".byte 2\n");
  ExpectNotServedStale("b4", assemble, "d.o");
}

// -fbranch-probabilities reads the .gcda file a profiled run left beside the object.
TEST_F(LauncherUnlistedInputsTest, ProfileDataFile) {
  std::string src =
      tmp_.Write("b/p.c",
                 "int work(int n) { int s = 0; for (int i = 0; i < n; ++i) {\n"
                 "  if (i % 3 == 0) s += i; else s -= 1; } return s; }\n"
                 "int main(int argc, char** argv) { return work(argc * 1000) & 1; }\n");
  testing::RunResult profiled = RunIn(
      tmp_ / "b", env_,
      "cc -O2 -fprofile-arcs -c p.c -o p.o && cc -fprofile-arcs p.o -o p && (./p; test -f p.gcda)");
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  std::string command = "$KCACHE cc -O2 -fbranch-probabilities -c p.c -o p.o";
  Build("b", command);
  fs::remove(tmp_ / "b/p.gcda");  // the profile gone: gcc warns and lays the code out plainly
  ExpectNotServedStale("b", command, "p.o");
}

// Two objects from one source with the same flags share an entry; the hit's dependency file
// must name its own object (and, with -MP, the phony targets), as the compiler's does: make
// otherwise never rebuilds the second object when a header changes.
TEST_F(LauncherUnlistedInputsTest, DependencyFileOfAHitNamesThisCommandsOutput) {
  std::string src = tmp_.Write("src/two.cpp", "#include \"two.h\"\nint two() { return TWO; }\n");
  tmp_.Write("src/two.h", "#define TWO 2\n");
  for (const char* phony : {"", "-MP "}) {
    auto command = [&](const std::string& object) {
      return absl::StrCat("$KCACHE c++ -MD ", phony, "-MF ", object, ".d -c ", src, " -o ", object);
    };
    std::string dir = absl::StrCat("b", phony[0] == '\0' ? "" : "-mp");
    fs::create_directories(tmp_ / (dir + "/sub"));
    ASSERT_EQ(Build(dir, command("first.o")), Outcome::kMiss) << last_output_;
    ASSERT_EQ(Build(dir, command("sub/second.o")), Outcome::kHit) << last_output_;
    std::string served = ReadAll(tmp_ / (dir + "/sub/second.o.d"));
    testing::RunResult real =
        RunIn(tmp_ / dir, env_, absl::StrReplaceAll(command("sub/second.o"), {{"$KCACHE ", ""}}));
    ASSERT_EQ(real.exit_code, 0) << real.output;
    EXPECT_EQ(DependencyWords(served), DependencyWords(ReadAll(tmp_ / (dir + "/sub/second.o.d"))))
        << "served:\n"
        << served;
  }
}

class NvccUnlistedInputsTest : public LauncherUnlistedInputsTest {
 protected:
  void SetUp() override {
    if (!HaveNvcc()) GTEST_SKIP() << "no nvcc at " << kNvcc;
    src_ = tmp_.Write("src/k.cu",
                      "__global__ void k(float* x) { x[threadIdx.x] *= FACTOR; }\n"
                      "int host() { return HOST; }\n");
  }
  std::string Compile(const std::string& extra) const {
    return absl::StrCat("$KCACHE nvcc -MD -MF k.o.d -gencode=arch=compute_89,code=sm_89 ", extra,
                        " -c ", src_, " -o k.o");
  }
  std::string src_;
};

// ptxas reads the options file -Xptxas names; nvcc reads --options-file in NVCC_APPEND_FLAGS.
TEST_F(NvccUnlistedInputsTest, OptionsFilesInPassThroughsAndTheEnvironment) {
  std::string ptxas = tmp_.Write("src/ptxas.opts", "-O3\n");
  std::string command = Compile(absl::StrCat("-DFACTOR=2 -DHOST=1 -Xptxas=--options-file=", ptxas));
  Build("b1", command);
  tmp_.Write("src/ptxas.opts", "-O0\n");
  ExpectNotServedStale("b2", command, "k.o");

  std::string nvcc_opts = tmp_.Write("src/nvcc.opts", "-DFACTOR=2 -DHOST=1\n");
  LauncherEnv env = env_;
  env.extra = absl::StrCat("NVCC_APPEND_FLAGS=\"--options-file ", nvcc_opts, "\"");
  Build("b3", Compile(""), &env);
  tmp_.Write("src/nvcc.opts", "-DFACTOR=5 -DHOST=4\n");
  ExpectNotServedStale("b4", Compile(""), "k.o", &env);
}

// nvcc runs its tools through a shell, which expands `$(...)` in an argument: here the macro's
// value is a file's content.
TEST_F(NvccUnlistedInputsTest, ShellExpansionInAnArgument) {
  std::string value = tmp_.Write("src/value", "2\n");
  std::string command = Compile(absl::StrCat("-DHOST=1 \"-DFACTOR=\\$(cat ", value, ")\""));
  Build("b1", command);
  tmp_.Write("src/value", "7\n");
  ExpectNotServedStale("b2", command, "k.o");
}

}  // namespace
}  // namespace kcache
