// A launcher keys what a compile was observed to read (engine/keys/observed_manifest.h):
// files, paths looked for and not found, environment variables, with no rule naming the tool,
// option or variable. Each test records a compile with the real compiler, changes one input
// no rule lists, and checks the next build is not served the first object (and that what it
// gets is what a build without kcache makes).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::Outcome;
using testing::ReadAll;
using testing::SameFile;

class ObservedInputsTest : public testing::LauncherTest {
 protected:
  // The object a build without kcache makes of `command` (a compiler command line, no
  // launcher), in `dir` under tmp_.
  std::string Plain(const std::string& dir, const std::string& command,
                    const std::string& env = "") {
    fs::create_directories(tmp_ / dir);
    testing::RunResult result =
        testing::Run(absl::StrCat("cd ", tmp_ / dir, " && ", env, " ", command));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return tmp_ / dir;
  }

  // An executable script at tmp_/tools/NAME.
  std::string Tool(const std::string& name, const std::string& text) {
    std::string path = tmp_.Write(absl::StrCat("tools/", name), text);
    chmod(path.c_str(), 0755);
    return path;
  }
};

// A compiler wrapper (any program a build names as its compiler) that reads a file no option
// names: the file's content is in the key without a rule for the wrapper.
TEST_F(ObservedInputsTest, ToolReadingAFileNobodyListedMissesWhenItChanges) {
  std::string value = tmp_.Write("config/value.txt", "5\n");
  std::string cc =
      Tool("mycc", absl::StrCat("#!/bin/sh\nexec gcc -DFROM_FILE=$(cat ", value, ") \"$@\"\n"));
  std::string source = tmp_.Write("src/f.c", "int f(void) { return FROM_FILE; }\n");
  std::string command = absl::StrCat(cc, " -O2 -c ", source, " -o f.o");
  ASSERT_EQ(Build("b1", absl::StrCat("$KCACHE -- ", command)), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", absl::StrCat("$KCACHE -- ", command)), Outcome::kHit) << last_output_;
  tmp_.Write("config/value.txt", "6\n");
  EXPECT_EQ(Build("b3", absl::StrCat("$KCACHE -- ", command)), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(SameFile(tmp_ / "b3/f.o", Plain("plain", command) + "/f.o"));
  EXPECT_FALSE(SameFile(tmp_ / "b1/f.o", tmp_ / "b3/f.o"));
}

// A wrapper script's variables are read from its environment, not through getenv: what the
// script expands is keyed all the same.
TEST_F(ObservedInputsTest, VariableAWrapperScriptExpandsIsKeyed) {
  std::string cc = Tool("mycc", "#!/bin/sh\nexec gcc $MY_EXTRA_FLAGS \"$@\"\n");
  std::string source = tmp_.Write("src/f.c", "int f(void) { return EXTRA; }\n");
  std::string command = absl::StrCat("$KCACHE -- ", cc, " -c ", source, " -o f.o");
  auto with = [&](int value) {
    testing::LauncherEnv env = env_;
    env.extra = absl::StrCat("MY_EXTRA_FLAGS=-DEXTRA=", value);
    return env;
  };
  testing::LauncherEnv one = with(1), two = with(2);
  ASSERT_EQ(Build("b1", command, &one), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command, &one), Outcome::kHit) << last_output_;
  EXPECT_EQ(Build("b3", command, &two), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(SameFile(tmp_ / "b1/f.o", tmp_ / "b3/f.o"));
  EXPECT_EQ(Build("b4", command, &one), Outcome::kHit) << last_output_;
  EXPECT_TRUE(SameFile(tmp_ / "b1/f.o", tmp_ / "b4/f.o"));
}

// gcc expands a response file wherever an argument starts with '@', an option's value too.
TEST_F(ObservedInputsTest, ResponseFileAsAnOptionsValueIsKeyedByItsContent) {
  std::string defs = tmp_.Write("defs", "VALUE=1\n");
  std::string source = tmp_.Write("src/v.cc", "int v() { return VALUE; }\n");
  std::string command = absl::StrCat("c++ -O2 -c ", source, " -o v.o -D @", defs);
  ASSERT_EQ(Build("b1", absl::StrCat("$KCACHE ", command)), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", absl::StrCat("$KCACHE ", command)), Outcome::kHit) << last_output_;
  tmp_.Write("defs", "VALUE=2\n");
  EXPECT_EQ(Build("b3", absl::StrCat("$KCACHE ", command)), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(SameFile(tmp_ / "b3/v.o", Plain("plain", command) + "/v.o"));
}

// The assembler reads what .incbin names: not in any dependency output, observed all the same.
TEST_F(ObservedInputsTest, IncbinBlobIsKeyedByItsContent) {
  std::string blob = tmp_.Write("data/blob.bin", "AAAA");
  std::string source =
      tmp_.Write("src/i.cc", absl::StrCat("asm(\".section .rodata\\n.incbin \\\"", blob,
                                          "\\\"\\n.text\");\nint i() { return 0; }\n"));
  std::string command = absl::StrCat("c++ -c ", source, " -o i.o");
  ASSERT_EQ(Build("b1", absl::StrCat("$KCACHE ", command)), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", absl::StrCat("$KCACHE ", command)), Outcome::kHit) << last_output_;
  tmp_.Write("data/blob.bin", "BBBB");
  EXPECT_EQ(Build("b3", absl::StrCat("$KCACHE ", command)), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(SameFile(tmp_ / "b3/i.o", Plain("plain", command) + "/i.o"));
}

// Files that did not exist when the entry was recorded: each path the compiler looked for and
// did not find is in the manifest.
TEST_F(ObservedInputsTest, FilesCreatedWhereTheCompilerLookedMiss) {
  tmp_.Write("inc/b/h.h", "#define H 1\n");
  std::string source = tmp_.Write("src/h.cc",
                                  "#include \"h.h\"\n"
                                  "#if __has_include(\"extra.h\")\n#include \"extra.h\"\n#endif\n"
                                  "#ifndef EXTRA\n#define EXTRA 0\n#endif\n"
                                  "int h() { return H + EXTRA; }\n");
  std::string command = absl::StrCat("$KCACHE c++ -I", tmp_ / "inc/none", " -I", tmp_ / "inc/a",
                                     " -I", tmp_ / "inc/b", " -c ", source, " -o h.o");
  fs::create_directories(tmp_ / "inc/a");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  // A header in a directory searched before the one it was found in.
  tmp_.Write("inc/a/h.h", "#define H 2\n");
  EXPECT_EQ(Build("b3", command), Outcome::kMiss) << last_output_;
  fs::remove(tmp_ / "inc/a/h.h");
  EXPECT_EQ(Build("b4", command), Outcome::kHit) << last_output_;
  EXPECT_TRUE(SameFile(tmp_ / "b1/h.o", tmp_ / "b4/h.o"));
  // A header in an -I directory that did not exist.
  tmp_.Write("inc/none/h.h", "#define H 3\n");
  EXPECT_EQ(Build("b5", command), Outcome::kMiss) << last_output_;
  fs::remove_all(tmp_ / "inc/none");
  // A header beside the source, which "" includes search first.
  tmp_.Write("src/h.h", "#define H 4\n");
  EXPECT_EQ(Build("b6", command), Outcome::kMiss) << last_output_;
  fs::remove(tmp_ / "src/h.h");
  // A __has_include target created later.
  tmp_.Write("inc/b/extra.h", "#define EXTRA 10\n");
  EXPECT_EQ(Build("b7", command), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(SameFile(tmp_ / "b1/h.o", tmp_ / "b7/h.o"));
}

// __TIME__ made by token pasting: no text search finds it, but the preprocessor reads the
// clock to expand it, and that is observed.
TEST_F(ObservedInputsTest, TokenPastedTimeMacroIsNeverStored) {
  std::string source =
      tmp_.Write("src/t.cc", "#define PASTE(a, b) a##b\nconst char* built = PASTE(__TI, ME__);\n");
  std::string command = absl::StrCat("$KCACHE c++ -c ", source, " -o t.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "not stored (time_macros)")) << last_output_;
  EXPECT_EQ(Build("b2", command), Outcome::kMiss) << last_output_;
}

// With debug information gcc writes $PWD as the working directory when it names it: a build
// under a symbolic link and one at the real path are told apart.
TEST_F(ObservedInputsTest, DebugBuildUnderASymlinkedDirectoryMisses) {
  std::string source = tmp_.Write("src/g.c", "int g(void) { return 1; }\n");
  fs::create_directories(tmp_ / "real");
  fs::create_directory_symlink(tmp_ / "real", tmp_ / "link");
  std::string command = absl::StrCat("$KCACHE cc -g -c ", source, " -o g.o");
  testing::LauncherEnv linked = env_, real = env_;
  linked.extra = absl::StrCat("PWD=", tmp_ / "link");
  real.extra = absl::StrCat("PWD=", tmp_ / "real");
  ASSERT_EQ(Build("link", command, &linked), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("real", command, &real), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("real", command, &real), Outcome::kHit) << last_output_;
  std::string dwarf =
      testing::Run(absl::StrCat("readelf --debug-dump=info ", tmp_ / "real/g.o")).output;
  EXPECT_TRUE(testing::Contains(dwarf, tmp_ / "real")) << dwarf;
}

// A program that drops LD_PRELOAD before it runs the compiler does not escape observation:
// the observer puts itself back into every program started.
TEST_F(ObservedInputsTest, WrapperThatClearsLdPreloadIsStillObserved) {
  std::string cc = Tool("mycc", "#!/bin/sh\nexec env -u LD_PRELOAD gcc \"$@\"\n");
  tmp_.Write("inc/h.h", "#define H 1\n");
  std::string source = tmp_.Write("src/h.c", "#include \"h.h\"\nint h(void) { return H; }\n");
  // The header is found through CPATH-free -I, but only gcc (under env) reads it.
  std::string command =
      absl::StrCat("$KCACHE -- ", cc, " -I", tmp_ / "inc", " -c ", source, " -o h.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  tmp_.Write("inc/h.h", "#define H 2\n");
  EXPECT_EQ(Build("b3", command), Outcome::kMiss) << last_output_;
}

// A program that cannot load the observer (statically linked) leaves the compile uncached:
// the build still succeeds, and nothing is stored.
TEST_F(ObservedInputsTest, StaticallyLinkedProgramLeavesTheCompileUncached) {
  std::string helper_source = tmp_.Write("tools/flag.c",
                                         "#include <stdio.h>\n"
                                         "int main(void) { puts(\"-DFLAG=1\"); return 0; }\n");
  std::string helper = tmp_ / "tools/flag";
  testing::RunResult built =
      testing::Run(absl::StrCat("cc -static -O2 ", helper_source, " -o ", helper));
  if (built.exit_code != 0) GTEST_SKIP() << "no static C library here: " << built.output;
  std::string cc = Tool("mycc", absl::StrCat("#!/bin/sh\nexec gcc $(", helper, ") \"$@\"\n"));
  std::string source = tmp_.Write("src/f.c", "int f(void) { return FLAG; }\n");
  std::string command = absl::StrCat("$KCACHE -- ", cc, " -c ", source, " -o f.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "statically linked")) << last_output_;
  EXPECT_EQ(Build("b2", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(fs::exists(tmp_ / "b2/f.o"));
}

// A write that failed wrote nothing but told the process what is there: a wrapper that takes
// a lock directory with mkdir, and compiles otherwise when it is already taken, is stored while
// the lock exists and misses once it is gone.
TEST_F(ObservedInputsTest, FailedMkdirIsKeyedAsWhatItFound) {
  std::string lock = tmp_ / "lock";
  fs::create_directories(lock);
  std::string cc =
      Tool("mycc", absl::StrCat("#!/bin/sh\nif mkdir ", lock, " 2>/dev/null; then rmdir ", lock,
                                "; exec gcc -DTAKEN=0 \"$@\"; fi\n"
                                "exec gcc -DTAKEN=1 \"$@\"\n"));
  std::string source = tmp_.Write("src/f.c", "int f(void) { return TAKEN; }\n");
  std::string command = absl::StrCat("$KCACHE -- ", cc, " -c ", source, " -o f.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(testing::Contains(last_output_, "not stored")) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  fs::remove(lock);
  EXPECT_EQ(Build("b3", command), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(SameFile(tmp_ / "b1/f.o", tmp_ / "b3/f.o"));
}

// What a program of the compile receives over a socket is not a file it read: a compile that
// connects anywhere (here a helper asking a local service for its flags) is never stored.
TEST_F(ObservedInputsTest, CompileThatConnectsToASocketIsNeverStored) {
  std::string helper_source =
      tmp_.Write("tools/ask.c",
                 "#include <stdio.h>\n#include <string.h>\n#include <sys/socket.h>\n"
                 "#include <sys/un.h>\n#include <unistd.h>\n"
                 "int main(void) {\n"
                 "  struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;\n"
                 "  strcpy(a.sun_path, \"/nonexistent/flags.sock\");\n"
                 "  int fd = socket(AF_UNIX, SOCK_STREAM, 0);\n"
                 "  connect(fd, (struct sockaddr*)&a, sizeof a); close(fd);\n"
                 "  puts(\"-DFLAG=1\"); return 0;\n}\n");
  std::string helper = tmp_ / "tools/ask";
  testing::RunResult built = testing::Run(absl::StrCat("cc -O2 ", helper_source, " -o ", helper));
  ASSERT_EQ(built.exit_code, 0) << built.output;
  std::string cc = Tool("mycc", absl::StrCat("#!/bin/sh\nexec gcc $(", helper, ") \"$@\"\n"));
  std::string source = tmp_.Write("src/f.c", "int f(void) { return FLAG; }\n");
  std::string command = absl::StrCat("$KCACHE -- ", cc, " -c ", source, " -o f.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "not stored (unreadable_input)")) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "flags.sock")) << last_output_;
  EXPECT_EQ(Build("b2", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(fs::exists(tmp_ / "b2/f.o"));
}

// -march=native lets the CPU the compile runs on pick the code (gcc asks the CPU itself, no
// file says which): a wrapper adding it, and nvcc's -arch=native in NVCC_APPEND_FLAGS, which
// nvcc reads itself, leave the compile unstored, however the parser saw the command.
TEST_F(ObservedInputsTest, NativeTargetsNoOptionShowsAreNeverStored) {
  std::string cc = Tool("mycc", "#!/bin/sh\nexec gcc -march=native \"$@\"\n");
  std::string source = tmp_.Write("src/f.c", "int f(void) { return 1; }\n");
  std::string command = absl::StrCat("$KCACHE -- ", cc, " -c ", source, " -o f.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "not stored (native_target)")) << last_output_;
  EXPECT_EQ(Build("b2", command), Outcome::kMiss) << last_output_;

  if (!fs::exists("/usr/local/cuda/bin/nvcc")) GTEST_SKIP() << "no nvcc";
  std::string kernel = tmp_.Write("src/k.cu", "__global__ void k(float* x) { x[0] *= 2.0f; }\n");
  testing::LauncherEnv env = env_;
  env.extra = "NVCC_APPEND_FLAGS=-arch=native";
  std::string nvcc = absl::StrCat("$KCACHE nvcc -c ", kernel, " -o k.o");
  Build("b3", nvcc, &env);  // with no GPU here nvcc may fail or fall back: never stored
  EXPECT_TRUE(testing::Contains(last_output_, "native_target")) << last_output_;
  EXPECT_NE(Build("b4", nvcc, &env), Outcome::kHit) << last_output_;
}

// -B names a directory the driver takes its programs from (conda's compiler_compat holds an
// `ld`): the assembler found there is keyed by what ran, not by any rule for -B.
TEST_F(ObservedInputsTest, ProgramFromABDirectoryIsKeyedByContent) {
  std::string as = Tool("bdir/as", "#!/bin/sh\nexec as --defsym MARK=1 \"$@\"\n");
  std::string source = tmp_.Write("src/f.c", "int f(void) { return 1; }\n");
  std::string flags = absl::StrCat("-B ", tmp_ / "tools/bdir/", " -c ", source, " -o f.o");
  std::string command = absl::StrCat("$KCACHE cc ", flags);
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  ASSERT_FALSE(testing::Contains(last_output_, "not stored")) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  Tool("bdir/as", "#!/bin/sh\nexec as --defsym MARK=2 \"$@\"\n");
  EXPECT_EQ(Build("b3", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(SameFile(tmp_ / "b3/f.o", Plain("plain", absl::StrCat("cc ", flags)) + "/f.o"));
  EXPECT_FALSE(SameFile(tmp_ / "b1/f.o", tmp_ / "b3/f.o"));
}

// A hit writes the command's outputs: a compile that also wrote another file (here a wrapper's
// log; a kept temporary or a listing an option asked for alike) is never stored.
TEST_F(ObservedInputsTest, CompileThatWritesMoreThanItsOutputsIsNeverStored) {
  std::string cc = Tool("mycc", "#!/bin/sh\necho compiled >> compile.log\nexec gcc \"$@\"\n");
  std::string source = tmp_.Write("src/f.c", "int f(void) { return 1; }\n");
  std::string command = absl::StrCat("$KCACHE -- ", cc, " -c ", source, " -o f.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "not stored (keep_temps)")) << last_output_;
  EXPECT_EQ(Build("b2", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(fs::exists(tmp_ / "b2/compile.log"));
}

// nvcc: a ptxas options file named inside -Xptxas, and a variable nvcc.profile reads
// (SYSTEM_INCLUDES), are keyed though no rule names either.
TEST_F(ObservedInputsTest, NvccToolOptionsFileAndProfileVariableAreKeyed) {
  if (!fs::exists("/usr/local/cuda/bin/nvcc")) GTEST_SKIP() << "no nvcc";
  std::string options = tmp_.Write("ptxas.opts", "-O0\n");
  std::string source = tmp_.Write("src/k.cu", "__global__ void k(float* x) { x[0] *= 2.0f; }\n");
  std::string command = absl::StrCat("$KCACHE nvcc -arch=sm_80 -Xptxas=--options-file=", options,
                                     " -c ", source, " -o k.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  tmp_.Write("ptxas.opts", "-O3\n");
  EXPECT_EQ(Build("b3", command), Outcome::kMiss) << last_output_;
  // nvcc embeds its temporary files' names (tmpxft_<pid>_<n>): the rest is reproducible.
  auto masked = [](const std::string& object) {
    std::string bytes = ReadAll(object);
    for (size_t at = bytes.find("tmpxft_"); at != std::string::npos;
         at = bytes.find("tmpxft_", at + 1)) {
      bytes.replace(at, std::min<size_t>(24, bytes.size() - at), std::string(24, 'x'), 0,
                    std::min<size_t>(24, bytes.size() - at));
    }
    return bytes;
  };
  std::string plain = Plain(
      "plain",
      absl::StrCat("nvcc -arch=sm_80 -Xptxas=--options-file=", options, " -c ", source, " -o k.o"));
  EXPECT_TRUE(masked(tmp_ / "b3/k.o") == masked(plain + "/k.o"));
  EXPECT_FALSE(masked(tmp_ / "b1/k.o") == masked(tmp_ / "b3/k.o"));
  testing::LauncherEnv system_includes = env_;
  system_includes.extra = absl::StrCat("SYSTEM_INCLUDES=-I", tmp_ / "src");
  EXPECT_EQ(Build("b4", command, &system_includes), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b5", command, &system_includes), Outcome::kHit) << last_output_;
}

}  // namespace
}  // namespace kcache
