// `kcache c++` / `kcache -- COMPILER` with the real c++ over a store directory: what must
// hit, what must miss (each input of the key), what is never cached, and the faults that
// must still give a correct build.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "engine/objects/store_object_cache.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_counters.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_run.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::LauncherEnv;
using testing::Outcome;
using testing::OutcomeOf;
using testing::ReadAll;
using testing::RunIn;

constexpr char kSource[] = R"(#include "config.h"
#include <cstdio>
int answer() { return ANSWER + OFFSET; }
)";

class CompilerLauncherTest : public testing::LauncherTest {
 protected:
  void SetUp() override {
    src_ = tmp_.Write("src/answer.cpp", kSource);
    tmp_.Write("src/include/config.h", "#define ANSWER 42\n");
  }

  // A torch-like compile: absolute source and include paths, -MD -MF, object in the build dir.
  std::string Compile(const std::string& extra = "") const {
    return absl::StrCat("$KCACHE c++ -MD -MF answer.o.d -I", tmp_ / "src/include",
                        " -DOFFSET=1 -O2 -fPIC ", extra, " -c ", src_, " -o answer.o");
  }
  // The same through kcache-launch, what the masquerade links point at.
  std::string LaunchCompile() const {
    return absl::StrReplaceAll(Compile(), {{"$KCACHE ", "$KCACHE_LAUNCH "}});
  }

  static testing::DaemonOptions KcachedOptions(std::vector<std::string> flags) {
    testing::DaemonOptions options;
    options.extra_flags = {"--no-toolkit"};
    options.extra_flags.insert(options.extra_flags.end(), flags.begin(), flags.end());
    return options;
  }

  // The launchers' environment through `daemon` instead of the store directory.
  LauncherEnv Through(testing::DaemonProcess& daemon) const {
    LauncherEnv remote = env_;
    remote.store.clear();
    remote.server = daemon.address();
    return remote;
  }

  // The daemon's counters by name (`kcache stat --json --server`).
  static json Counters(testing::DaemonProcess& daemon) { return testing::DaemonCounters(daemon); }

  std::string src_;
};

TEST_F(CompilerLauncherTest, SecondBuildInAnotherDirectoryHitsWithIdenticalOutputs) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2/deeper", Compile()), Outcome::kHit) << last_output_;
  // The hit's line says how long it took.
  EXPECT_TRUE(
      std::regex_search(last_output_, std::regex(R"(kcache: hit \S+answer\.cpp \(\d+\.\d ms\))")))
      << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/deeper/answer.o"));
  std::string deps = ReadAll(tmp_ / "b2/deeper/answer.o.d");
  EXPECT_TRUE(testing::Contains(deps, "answer.o:")) << deps;
  EXPECT_TRUE(testing::Contains(deps, tmp_ / "src/include/config.h")) << deps;
}

TEST_F(CompilerLauncherTest, DependencyFileOfAHitNamesThisBuildsPaths) {
  std::string command =
      "$KCACHE c++ -MD -MF answer.o.d -Iinclude -DOFFSET=1 -c answer.cpp -o answer.o";
  tmp_.Write("a/answer.cpp", kSource);
  tmp_.Write("a/include/config.h", "#define ANSWER 42\n");
  tmp_.Write("b/answer.cpp", kSource);
  tmp_.Write("b/include/config.h", "#define ANSWER 42\n");
  ASSERT_EQ(Build("a", command), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b", command), Outcome::kHit) << last_output_;
  std::string deps = ReadAll(tmp_ / "b/answer.o.d");
  EXPECT_TRUE(testing::Contains(deps, "include/config.h")) << deps;
  EXPECT_FALSE(testing::Contains(deps, tmp_ / "a")) << deps;
}

TEST_F(CompilerLauncherTest, EditedHeaderMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  tmp_.Write("src/include/config.h", "#define ANSWER 43\n");
  EXPECT_EQ(Build("b2", Compile()), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
}

TEST_F(CompilerLauncherTest, ChangedDefineMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  std::string changed = Compile();
  changed.replace(changed.find("-DOFFSET=1"), 10, "-DOFFSET=2");
  EXPECT_EQ(Build("b2", changed), Outcome::kMiss) << last_output_;
}

TEST_F(CompilerLauncherTest, AnotherCompilerBinaryMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  // A wrapper script standing in for the compiler: the same name, another content.
  std::string copy = tmp_.Write("tools/c++", "#!/bin/sh\nexec c++ \"$@\"\n");
  fs::permissions(copy, fs::perms::owner_all);
  std::string with_copy = Compile();
  with_copy.replace(with_copy.find("$KCACHE c++"), 11, absl::StrCat("$KCACHE -- ", copy));
  EXPECT_EQ(Build("b2", with_copy), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b3", with_copy), Outcome::kHit) << last_output_;
}

TEST_F(CompilerLauncherTest, HeaderShadowedThroughCpathMisses) {
  tmp_.Write("src/other.h", "#define OTHER 1\n");
  std::string command = absl::StrCat(
      "$KCACHE c++ -MD -MF o.o.d -c ",
      tmp_.Write("src/o.cpp", "#include <other.h>\nint o() { return OTHER; }\n"), " -o o.o");
  LauncherEnv env = env_;
  env.extra = absl::StrCat("CPATH=", tmp_ / "src");
  ASSERT_EQ(Build("b1", command, &env), Outcome::kMiss) << last_output_;
  tmp_.Write("shadow/other.h", "#define OTHER 2\n");
  env.extra = absl::StrCat("CPATH=", tmp_ / "shadow", ":", tmp_ / "src");
  EXPECT_EQ(Build("b2", command, &env), Outcome::kMiss) << last_output_;
}

TEST_F(CompilerLauncherTest, BaseDirectoryCoversSourcesAtAnotherPath) {
  for (const char* tree : {"one", "two"}) {
    tmp_.Write(absl::StrCat(tree, "/answer.cpp"), absl::StrReplaceAll(kSource, {{"OFFSET", "1"}}));
    tmp_.Write(absl::StrCat(tree, "/include/config.h"), "#define ANSWER 42\n");
  }
  auto command = [&](const char* tree) {
    std::string root = tmp_ / tree;
    return absl::StrCat("$KCACHE c++ -MD -MF x.o.d -I", root, "/include -c ", root,
                        "/answer.cpp -o x.o");
  };
  LauncherEnv one = env_, two = env_;
  one.extra = absl::StrCat("KCACHE_BASEDIR=", tmp_ / "one");
  two.extra = absl::StrCat("KCACHE_BASEDIR=", tmp_ / "two");
  ASSERT_EQ(Build("build1", command("one"), &one), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("build2", command("two"), &two), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::Contains(ReadAll(tmp_ / "build2/x.o.d"), tmp_ / "two/include/config.h"));
  // Without the base directory the absolute paths differ: a miss.
  EXPECT_EQ(Build("build3", command("two")), Outcome::kMiss) << last_output_;
}

TEST_F(CompilerLauncherTest, WarningsAndExitCodeAreReplayed) {
  std::string warn = tmp_.Write("src/warn.cpp", "int f() { int unused = 1; return 0; }\n");
  std::string command = absl::StrCat("$KCACHE c++ -Wall -MD -MF w.o.d -c ", warn, " -o w.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss);
  std::string first = last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit);
  EXPECT_TRUE(testing::Contains(last_output_, "unused variable")) << last_output_;
  EXPECT_TRUE(testing::Contains(first, "unused variable")) << first;
}

TEST_F(CompilerLauncherTest, FailedCompileIsNotStored) {
  std::string bad = tmp_.Write("src/bad.cpp", "int f() { return missing; }\n");
  std::string command = absl::StrCat("$KCACHE c++ -MD -MF bad.o.d -c ", bad, " -o bad.o");
  for (const char* dir : {"b1", "b2"}) {
    fs::create_directories(tmp_ / dir);
    testing::RunResult result = RunIn(tmp_ / dir, env_, command);
    EXPECT_NE(result.exit_code, 0);
    EXPECT_EQ(OutcomeOf(result.output), Outcome::kMiss) << result.output;
    EXPECT_TRUE(testing::Contains(result.output, "missing")) << result.output;
  }
}

TEST_F(CompilerLauncherTest, CommandWithoutDependencyFileIsCachedAndWritesNone) {
  std::string command =
      absl::StrCat("$KCACHE c++ -I", tmp_ / "src/include", " -DOFFSET=1 -c ", src_, " -o a.o");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  EXPECT_FALSE(fs::exists(tmp_ / "b2/a.d"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_ / "b1"), fs::directory_iterator()), 1);
}

TEST_F(CompilerLauncherTest, LinksVersionQueriesAndUnknownOptionsRunUncached) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  for (const std::string& command :
       {std::string("$KCACHE c++ --version"), std::string("$KCACHE c++ -r answer.o -o partial.o"),
        Compile("-fprofile-arcs"), Compile("--coverage"), Compile("-save-temps"),
        Compile("-frobnicate-unknown -Zq")}) {
    testing::RunResult result = RunIn(tmp_ / "b1", env_, command);
    EXPECT_EQ(OutcomeOf(result.output), Outcome::kUncached) << command << "\n" << result.output;
  }
}

// A shared library for one-source shared objects to link against: built here, not cached.
std::string BuildLibrary(const testing::TempDir& tmp, const std::string& body) {
  std::string source = tmp.Write("lib/dep.cpp", body);
  testing::RunResult built =
      testing::Run(absl::StrCat("c++ -shared -fPIC ", source, " -o ", tmp / "lib/libdep.so"));
  EXPECT_EQ(built.exit_code, 0) << built.output;
  return tmp / "lib";
}

// Inductor's CPU commands: one source compiled and linked into a shared object.
std::string LinkCommand(const testing::TempDir& tmp, const std::string& source) {
  return absl::StrCat("$KCACHE c++ -O2 -fPIC -shared ", source, " -o libk.so -L", tmp / "lib",
                      " -ldep");
}

TEST_F(CompilerLauncherTest, OneSourceSharedObjectHitsAndIsExecutable) {
  BuildLibrary(tmp_, "int dep() { return 1; }\n");
  std::string source = tmp_.Write("src/k.cpp", "int dep();\nint k() { return dep() + 1; }\n");
  ASSERT_EQ(Build("b1", LinkCommand(tmp_, source)), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", LinkCommand(tmp_, source)), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/libk.so", tmp_ / "b2/libk.so"));
  EXPECT_NE(fs::status(tmp_ / "b2/libk.so").permissions() & fs::perms::owner_exec, fs::perms::none);
  // Nothing of the link is left behind: only the shared object.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_ / "b1"), fs::directory_iterator()), 1);
}

// The linker's inputs are keyed by content: a library rebuilt at the same path misses.
TEST_F(CompilerLauncherTest, ChangedLinkedLibraryMisses) {
  BuildLibrary(tmp_, "int dep() { return 1; }\n");
  std::string source = tmp_.Write("src/k.cpp", "int dep();\nint k() { return dep() + 1; }\n");
  ASSERT_EQ(Build("b1", LinkCommand(tmp_, source)), Outcome::kMiss) << last_output_;
  BuildLibrary(tmp_, "int dep() { return 1; }\nint more() { return 2; }\n");
  EXPECT_EQ(Build("b2", LinkCommand(tmp_, source)), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b3", LinkCommand(tmp_, source)), Outcome::kHit) << last_output_;
}

// The link's own inputs besides the files ld lists: the linker binary (another `ld` first in
// PATH, a wrapper with the same behaviour) and the environment a link reads (LIBRARY_PATH).
TEST_F(CompilerLauncherTest, AnotherLinkerOrLinkEnvironmentMisses) {
  BuildLibrary(tmp_, "int dep() { return 1; }\n");
  std::string source = tmp_.Write("src/k.cpp", "int dep();\nint k() { return dep() + 1; }\n");
  ASSERT_EQ(Build("b1", LinkCommand(tmp_, source)), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", LinkCommand(tmp_, source)), Outcome::kHit) << last_output_;
  std::string ld = tmp_.Write("ldwrap/ld", "#!/bin/sh\nexec /usr/bin/ld \"$@\"\n");
  fs::permissions(ld, fs::perms::owner_all);
  LauncherEnv other_ld = env_;
  other_ld.extra = absl::StrCat("PATH=", tmp_ / "ldwrap", ":$PATH");
  EXPECT_EQ(Build("b3", LinkCommand(tmp_, source), &other_ld), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b4", LinkCommand(tmp_, source), &other_ld), Outcome::kHit) << last_output_;
  LauncherEnv library_path = env_;
  library_path.extra = absl::StrCat("LIBRARY_PATH=", tmp_ / "lib");
  EXPECT_EQ(Build("b5", LinkCommand(tmp_, source), &library_path), Outcome::kMiss) << last_output_;
}

// torch's link of an extension: its objects, against libraries, into the module.
std::string LinkObjects(const testing::TempDir& tmp) {
  return absl::StrCat("$KCACHE c++ answer.o -shared -L", tmp / "lib", " -ldep -o libanswer.so");
}

// What the real linker makes of the same command in `dir`, uncached (fresh.so).
std::string FreshLink(const testing::TempDir& tmp, const std::string& dir) {
  testing::RunResult linked = testing::Run(absl::StrCat(
      "cd ", tmp / dir, " && c++ answer.o -shared -L", tmp / "lib", " -ldep -o fresh.so"));
  EXPECT_EQ(linked.exit_code, 0) << linked.output;
  return absl::StrCat(tmp / dir, "/fresh.so");
}

TEST_F(CompilerLauncherTest, LinkOfObjectsHitsInAnotherBuildDirectoryWithTheLinkersBytes) {
  BuildLibrary(tmp_, "int dep() { return 1; }\n");
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b1", LinkObjects(tmp_)), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", Compile()), Outcome::kHit) << last_output_;
  ASSERT_EQ(Build("b2", LinkObjects(tmp_)), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "kcache: hit libanswer.so")) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b2/libanswer.so", FreshLink(tmp_, "b2")));
  EXPECT_NE(fs::status(tmp_ / "b2/libanswer.so").permissions() & fs::perms::owner_exec,
            fs::perms::none);
}

// Each input of a link of objects: an object, a library's interface, the libraries named.
TEST_F(CompilerLauncherTest, LinkOfObjectsMissesForAnotherObjectLibraryOrLibraryList) {
  BuildLibrary(tmp_, "int dep() { return 1; }\n");
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b1", LinkObjects(tmp_)), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", Compile("-O0")), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b2", LinkObjects(tmp_)), Outcome::kMiss) << last_output_;  // its object
  BuildLibrary(tmp_, "int dep() { return 1; }\nint more() { return 2; }\n");
  EXPECT_EQ(Build("b1", LinkObjects(tmp_)), Outcome::kMiss) << last_output_;  // a symbol more
  EXPECT_EQ(Build("b1", LinkObjects(tmp_) + " -lm"), Outcome::kMiss) << last_output_;
}

// A library is keyed by its link interface, not its code: rebuilt with another body of the
// same layout (and no build ID, which would differ), the link hits, and what the hit writes
// is what the linker makes of it.
TEST_F(CompilerLauncherTest, LinkOfObjectsHitsWhenOnlyALibrarysCodeChanged) {
  auto library = [this](int value) {
    std::string source =
        tmp_.Write("lib/dep.cpp", absl::StrCat("int dep() { return ", value, "; }\n"));
    testing::RunResult built = testing::Run(absl::StrCat("c++ -shared -fPIC -Wl,--build-id=none ",
                                                         source, " -o ", tmp_ / "lib/libdep.so"));
    ASSERT_EQ(built.exit_code, 0) << built.output;
  };
  library(1);
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b1", LinkObjects(tmp_)), Outcome::kMiss) << last_output_;
  std::string before = testing::ReadAll(tmp_ / "lib/libdep.so");
  library(2);
  ASSERT_NE(testing::ReadAll(tmp_ / "lib/libdep.so"), before);
  ASSERT_EQ(Build("b2", Compile()), Outcome::kHit) << last_output_;
  EXPECT_EQ(Build("b2", LinkObjects(tmp_)), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b2/libanswer.so", FreshLink(tmp_, "b2")));
}

// The programs the driver runs are keyed by content: another assembler first in PATH; one put
// later into a directory the driver searches for programs (COMPILER_PATH's here), though the
// environment is the same and what the driver answered before is memoized.
TEST_F(CompilerLauncherTest, AnotherAssemblerMissesEvenOnceTheDriversAnswersAreMemoized) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", Compile()), Outcome::kHit) << last_output_;
  EXPECT_TRUE(fs::exists(tmp_ / "state/driver-programs"));
  std::string as = tmp_.Write("aswrap/as", "#!/bin/sh\nexec /usr/bin/as \"$@\"\n");
  fs::permissions(as, fs::perms::owner_all);
  LauncherEnv other_as = env_;
  other_as.extra = absl::StrCat("PATH=", tmp_ / "aswrap", ":$PATH");
  EXPECT_EQ(Build("b3", Compile(), &other_as), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b4", Compile(), &other_as), Outcome::kHit) << last_output_;

  fs::create_directories(tmp_ / "programs");
  LauncherEnv searched = env_;
  searched.extra = absl::StrCat("COMPILER_PATH=", tmp_ / "programs");
  ASSERT_EQ(Build("b5", Compile(), &searched), Outcome::kMiss) << last_output_;  // keyed env
  ASSERT_EQ(Build("b6", Compile(), &searched), Outcome::kHit) << last_output_;
  fs::copy_file(as, tmp_ / "programs/as");
  EXPECT_EQ(Build("b7", Compile(), &searched), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b8", Compile(), &searched), Outcome::kHit) << last_output_;
}

// -march=native is keyed by what the compiler expands it to here. A wrapper stands in for
// the same compiler on another CPU: with FAKE_CPU set (an environment variable kcache does
// not key), its `-###` expansion names one more feature flag.
TEST_F(CompilerLauncherTest, NativeTargetIsKeyedByThisMachinesExpansion) {
  std::string wrapper =
      tmp_.Write("tools/c++",
                 "#!/bin/sh\n"
                 "if [ -n \"$FAKE_CPU\" ]; then\n"
                 "  for a in \"$@\"; do [ \"$a\" = '-###' ] && exec c++ \"$@\" -mno-avx512f; done\n"
                 "fi\n"
                 "exec c++ \"$@\"\n");
  fs::permissions(wrapper, fs::perms::owner_all);
  std::string command = Compile("-march=native");
  command.replace(command.find("$KCACHE c++"), 11, absl::StrCat("$KCACHE -- ", wrapper));
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  LauncherEnv other_cpu = env_;
  other_cpu.extra = "FAKE_CPU=1";
  EXPECT_EQ(Build("b3", command, &other_cpu), Outcome::kMiss) << last_output_;
}

// A header precompiled beside the one a source includes stands in for it: GCC's dependency
// output names neither the .gch nor the header. The .gch is keyed by content: a header edited
// and precompiled again misses; a .gch left stale beside its header gives what GCC makes
// from the .gch; with the .gch gone, the header's text is read (and keyed) again.
TEST_F(CompilerLauncherTest, ChangedPrecompiledHeaderMisses) {
  std::string header_path = tmp_ / "src/pch/all.h";
  auto header = [&](int value) {
    tmp_.Write("src/pch/all.h",
               absl::StrCat("#include <vector>\ninline int pch_value() { return ", value, "; }\n"));
  };
  auto precompile = [&] {
    testing::RunResult built = testing::Run(
        absl::StrCat("c++ -x c++-header -O2 -fPIC ", header_path, " -o ", header_path, ".gch"));
    ASSERT_EQ(built.exit_code, 0) << built.output;
  };
  std::string source =
      tmp_.Write("src/pch/use.cpp", "#include \"all.h\"\nint use() { return pch_value(); }\n");
  std::string command = absl::StrCat("$KCACHE c++ -O2 -fPIC -MD -MF u.o.d -c ", source, " -o u.o");
  header(1);
  precompile();
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  header(2);
  precompile();
  EXPECT_EQ(Build("b3", command), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(testing::SameFile(tmp_ / "b1/u.o", tmp_ / "b3/u.o"));
  // The header's text back to the first, its .gch still the second's: GCC compiles from the
  // .gch, so the answer is b3's object (the entry whose .gch matches), never b1's.
  header(1);
  EXPECT_EQ(Build("b4", command), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b3/u.o", tmp_ / "b4/u.o"));
  fs::remove(header_path + ".gch");  // without it GCC reads the header's text: b1's object
  EXPECT_EQ(Build("b5", command), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/u.o", tmp_ / "b5/u.o"));
}

// Inductor's precompiled header command (-x c++-header without -c) is cached like a compile.
TEST_F(CompilerLauncherTest, PrecompiledHeaderCommandHits) {
  std::string header = tmp_.Write("src/p.h", "#include <vector>\ninline int p() { return 3; }\n");
  std::string command = absl::StrCat("$KCACHE c++ -x c++-header -O2 -fPIC ", header, " -o p.h.gch");
  ASSERT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/p.h.gch", tmp_ / "b2/p.h.gch"));
}

TEST_F(CompilerLauncherTest, MasqueradeLinkFindsTheRealCompiler) {
  fs::create_directories(tmp_ / "shims");
  fs::create_symlink(testing::KcacheCli(), tmp_ / "shims/c++");
  std::string command = Compile();
  command.replace(command.find("$KCACHE c++"), 11, "c++");
  LauncherEnv env = env_;
  env.extra = absl::StrCat("PATH=", tmp_ / "shims", ":$PATH");
  ASSERT_EQ(Build("b1", command, &env), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b2", command, &env), Outcome::kHit) << last_output_;
  testing::RunResult version = RunIn(tmp_ / "b1", env, "c++ --version");
  EXPECT_EQ(version.exit_code, 0) << version.output;
}

TEST_F(CompilerLauncherTest, CorruptStoredObjectIsAMissAndNeverWritten) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  {  // Replace the stored bundle with bytes that are not one (checksums valid: a hostile put).
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(env_.store);
    ASSERT_TRUE(store.ok()) << store.status();
    std::unique_ptr<objects::ObjectCache> cache = objects::NewStoreObjectCache(store->get());
    absl::StatusOr<std::vector<ObjectEntry>> all = cache->ListAll();
    ASSERT_TRUE(all.ok());
    ASSERT_EQ(all->size(), 1u);
    ASSERT_TRUE(cache->Put((*all)[0], "not a bundle").ok());
  }
  EXPECT_EQ(Build("b2", Compile()), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  EXPECT_EQ(Build("b3", Compile()), Outcome::kHit) << last_output_;
}

TEST_F(CompilerLauncherTest, UnusableStoreStillBuildsCorrectly) {
  LauncherEnv broken = env_;
  broken.store = tmp_.Write("not-a-store", "just a file");
  ASSERT_EQ(Build("b1", Compile(), &broken), Outcome::kMiss) << last_output_;
  LauncherEnv dead = env_;
  dead.store.clear();
  dead.server = absl::StrCat("unix:", tmp_ / "no-such.sock");
  ASSERT_EQ(Build("b2", Compile(), &dead), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  EXPECT_FALSE(ReadAll(tmp_ / "b2/answer.o").empty());
}

TEST_F(CompilerLauncherTest, HitWhileAnotherProcessHoldsTheStoreForWriting) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss) << last_output_;
  // Held for writing (kcache warm, or a launcher storing its miss): a lookup opens the store
  // read-only, so it neither waits for the holder nor misses.
  absl::StatusOr<std::unique_ptr<Store>> holder = OpenStore(env_.store);
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(Build("b2", Compile()), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
}

TEST_F(CompilerLauncherTest, ObjectOverTheStoresSizeBoundIsNotStoredAndTheBuildSucceeds) {
  LauncherEnv bounded = env_;
  bounded.extra = "KCACHE_MAX_OBJECT_BYTES=100";
  ASSERT_EQ(Build("b1", Compile(), &bounded), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "over --object-max-bytes 100")) << last_output_;
  ASSERT_EQ(Build("b2", Compile()), Outcome::kMiss) << last_output_;  // nothing was stored
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  EXPECT_EQ(Build("b3", Compile()), Outcome::kHit) << last_output_;  // the default bound stores
}

TEST_F(CompilerLauncherTest, ObjectOverKcachedsSizeBoundIsRefusedAndTheBuildSucceeds) {
  testing::DaemonProcess daemon(KcachedOptions({"--object-max-bytes", "100"}));
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  LauncherEnv remote = Through(daemon);
  ASSERT_EQ(Build("b1", Compile(), &remote), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "--object-max-bytes 100")) << last_output_;
  EXPECT_FALSE(ReadAll(tmp_ / "b1/answer.o").empty());
  EXPECT_EQ(Build("b2", Compile(), &remote), Outcome::kMiss) << last_output_ << daemon.Log();
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  json counters = Counters(daemon);
  EXPECT_EQ(counters["objects.lookups"], 2) << counters;
  EXPECT_EQ(counters["objects.puts_refused"], 2) << counters;
  EXPECT_EQ(counters["objects.stored"], 0) << counters;
}

TEST_F(CompilerLauncherTest, KcachedCountsLookupsObjectsServedAndStored) {
  testing::DaemonProcess daemon(KcachedOptions({}));
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  LauncherEnv remote = Through(daemon);
  ASSERT_EQ(Build("b1", Compile(), &remote), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", Compile(), &remote), Outcome::kHit) << last_output_ << daemon.Log();
  json counters = Counters(daemon);
  EXPECT_EQ(counters["objects.lookups"], 2) << counters;
  EXPECT_EQ(counters["objects.stored"], 1) << counters;
  EXPECT_EQ(counters["objects.served"], 1) << counters;
  EXPECT_EQ(counters["objects.puts_refused"], 0) << counters;
}

// kcache-launch, what the masquerade links point at, through kcached: a miss is handed to
// kcache (which asks over gRPC, compiles and stores); the next build's hit comes over the fast
// path, its listing and bundle placed in the arena, with the same outputs; lookups are counted
// once per launcher run.
TEST_F(CompilerLauncherTest, LaunchBinaryHitsOverTheFastPathAndHandsAMissToKcache) {
  testing::DaemonProcess daemon(KcachedOptions({}));
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  LauncherEnv remote = Through(daemon);
  std::string command = LaunchCompile();
  ASSERT_EQ(Build("b1", command, &remote), Outcome::kMiss) << last_output_;
  int64_t arena_after_miss = Counters(daemon)["fast.arena_bytes"];  // an empty listing's slot
  ASSERT_EQ(Build("b2", command, &remote), Outcome::kHit) << last_output_ << daemon.Log();
  std::string object = ReadAll(tmp_ / "b2/answer.o");
  EXPECT_EQ(ReadAll(tmp_ / "b1/answer.o"), object);
  json counters = Counters(daemon);
  // The hit's listing and bundle were placed in the arena.
  EXPECT_GT(counters["fast.arena_bytes"].get<int64_t>(),
            arena_after_miss + static_cast<int64_t>(object.size()))
      << counters;
  EXPECT_EQ(counters["objects.lookups"], 2) << counters;
  EXPECT_EQ(counters["objects.served"], 1) << counters;
  EXPECT_EQ(counters["objects.stored"], 1) << counters;
  // Commands run uncached are counted by reason: torch's version query, a partial link.
  EXPECT_EQ(counters["objects.uncached_not_a_compile"], 0) << counters;
  ASSERT_EQ(Build("b3", "$KCACHE_LAUNCH c++ --version", &remote), Outcome::kUncached);
  ASSERT_EQ(Build("b2", "$KCACHE_LAUNCH c++ -r answer.o -o partial.o", &remote), Outcome::kUncached)
      << last_output_;
  EXPECT_TRUE(absl::StrContains(last_output_, "uncached (not_a_compile)")) << last_output_;
  ASSERT_EQ(Build("b4", "$KCACHE c++ -E -x c++ /dev/null", &remote), Outcome::kUncached);
  // The notes are not waited for (the launcher execs the compiler at once): the daemon counts
  // them as it reads them.
  for (int i = 0; i < 200; ++i) {
    counters = Counters(daemon);
    if (counters["objects.uncached_not_a_compile"] == 2 &&
        counters["objects.uncached_preprocess_only"] == 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(counters["objects.uncached_not_a_compile"], 2) << counters;
  EXPECT_EQ(counters["objects.uncached_preprocess_only"], 1) << counters;
  // And by the option that decided it (a query without -c has none).
  testing::RunResult stat =
      testing::Run(absl::StrCat(testing::KcacheCli(), " stat --json --server ", daemon.address()));
  ASSERT_EQ(stat.exit_code, 0) << stat.output;
  EXPECT_EQ(json::parse(stat.output)["uncached_by_option"],
            json::parse(R"([{"reason": "preprocess_only", "option": "-E", "count": 1}])"))
      << stat.output;
}

// kcached answers a listing or bundle it has answered before from its slot in the arena (not
// read, encoded and checksummed again: objects.memory_hits counts each), until a put: a second
// entry stored under the same key1 (a header edited) is in the next listing at once, and the
// build with the edited header hits it.
TEST_F(CompilerLauncherTest, LaunchBinaryAnswersAreReusedUntilAPutChangesThem) {
  testing::DaemonProcess daemon(KcachedOptions({}));
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  LauncherEnv remote = Through(daemon);
  std::string command = LaunchCompile();
  ASSERT_EQ(Build("b1", command, &remote), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("b2", command, &remote), Outcome::kHit) << last_output_ << daemon.Log();
  int64_t memory_hits = Counters(daemon)["objects.memory_hits"];
  ASSERT_EQ(Build("b3", command, &remote), Outcome::kHit) << last_output_ << daemon.Log();
  EXPECT_EQ(ReadAll(tmp_ / "b3/answer.o"), ReadAll(tmp_ / "b1/answer.o"));
  json counters = Counters(daemon);
  EXPECT_EQ(counters["objects.memory_hits"], memory_hits + 2) << counters;  // listing, bundle
  EXPECT_EQ(counters["objects.served"], 2) << counters;
  tmp_.Write("src/include/config.h", "#define ANSWER 43\n");
  ASSERT_EQ(Build("b4", command, &remote), Outcome::kMiss) << last_output_;
  memory_hits = Counters(daemon)["objects.memory_hits"];
  // b5's listing and bundle are read again (the put changed the key1's listing), none
  // answered from before: an old listing would have sent kcache-launch to kcache, which would
  // have hit over gRPC.
  ASSERT_EQ(Build("b5", command, &remote), Outcome::kHit) << last_output_ << daemon.Log();
  EXPECT_EQ(Counters(daemon)["objects.memory_hits"], memory_hits);
  EXPECT_EQ(ReadAll(tmp_ / "b5/answer.o"), ReadAll(tmp_ / "b4/answer.o"));
  EXPECT_NE(ReadAll(tmp_ / "b5/answer.o"), ReadAll(tmp_ / "b1/answer.o"));
  counters = Counters(daemon);
  EXPECT_EQ(counters["objects.stored"], 2) << counters;
  EXPECT_EQ(counters["objects.served"], 3) << counters;
}

// Without a fast socket to ask (a store directory, a dead kcached), kcache-launch hands every
// command to kcache unchanged, masquerade name included: the build is the same.
TEST_F(CompilerLauncherTest, LaunchBinaryWithoutAFastPathBehavesAsKcache) {
  std::string command = LaunchCompile();
  EXPECT_EQ(Build("b1", command), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b2", command), Outcome::kHit) << last_output_;
  LauncherEnv dead = env_;
  dead.store.clear();
  dead.server = absl::StrCat("unix:", tmp_ / "no-such.sock");
  EXPECT_EQ(Build("b3", command, &dead), Outcome::kMiss) << last_output_;
  EXPECT_EQ(ReadAll(tmp_ / "b1/answer.o"), ReadAll(tmp_ / "b3/answer.o"));
  // A masquerade link to kcache-launch first in PATH: neither binary takes it for the real c++.
  fs::create_directories(tmp_ / "shims");
  fs::create_symlink(testing::KcacheLaunch(), tmp_ / "shims/c++");
  LauncherEnv shimmed = env_;
  shimmed.extra = absl::StrCat("PATH=", tmp_ / "shims", ":$PATH");
  std::string through_link = absl::StrReplaceAll(Compile(), {{"$KCACHE c++", "c++"}});
  EXPECT_EQ(Build("b4", through_link, &shimmed), Outcome::kHit) << last_output_;
  EXPECT_EQ(Build("b5", "c++ --version", &shimmed), Outcome::kUncached) << last_output_;
}

TEST_F(CompilerLauncherTest, EightConcurrentLaunchersLeaveIntactObjects) {
  std::string script;
  for (int i = 0; i < 8; ++i) {
    fs::create_directories(tmp_ / absl::StrCat("p", i));
    absl::StrAppend(&script, "(cd ", tmp_ / absl::StrCat("p", i), " && ", Compile(), ") & ");
  }
  absl::StrAppend(&script, "wait");
  testing::RunResult result = RunIn(tmp_.path(), env_, script);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  ASSERT_EQ(Build("check", Compile()), Outcome::kHit) << last_output_;
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(
        testing::SameFile(tmp_ / absl::StrCat("p", i, "/answer.o"), tmp_ / "check/answer.o"));
  }
  StoreOptions read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(env_.store, read_only);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<StoreVerifyReport> report = (*store)->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->corrupt.empty());
}

// Eight different compiles at once on a store that does not exist yet (the first step of a
// parallel build in a new pod): every launcher waits for the one creating the store, and every
// object is stored, so a second build hits all eight.
TEST_F(CompilerLauncherTest, EightLaunchersCreatingTheStoreAtOnceStoreEveryObject) {
  ASSERT_FALSE(fs::exists(env_.store));
  auto script = [&](const std::string& build) {
    std::string text;
    for (int i = 0; i < 8; ++i) {
      std::string dir = tmp_ / absl::StrCat(build, "/p", i);
      fs::create_directories(dir);
      absl::StrAppend(&text, "(cd ", dir, " && ", Compile(absl::StrCat("-DVARIANT=", i)), ") & ");
    }
    return absl::StrCat(text, "wait");
  };
  testing::RunResult first = RunIn(tmp_.path(), env_, script("first"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_FALSE(testing::Contains(first.output, "unavailable")) << first.output;
  EXPECT_FALSE(testing::Contains(first.output, "not stored")) << first.output;
  testing::RunResult second = RunIn(tmp_.path(), env_, script("second"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  int hits = 0;
  for (size_t at = second.output.find("kcache: hit "); at != std::string::npos;
       at = second.output.find("kcache: hit ", at + 1)) {
    ++hits;
  }
  EXPECT_EQ(hits, 8) << second.output;
}

// The masquerade `kcache run` gives for `generic`: GCC's own name when both are GCC here (as
// on Debian), so tools that tell GCC by its --version line see it.
std::string ExpectedCompilerName(const std::string& generic, const std::string& gnu) {
  auto real = [](const std::string& name) {
    return testing::Run(absl::StrCat("readlink -f \"$(command -v ", name, ")\"")).output;
  };
  std::string plain = real(generic);
  return !plain.empty() && plain == real(gnu) ? gnu : generic;
}

TEST_F(CompilerLauncherTest, EnvPrintsWhatRunSets) {
  std::string shims = tmp_ / "shims";
  std::string cxx = ExpectedCompilerName("c++", "g++");
  EXPECT_EQ(cxx, "g++");  // this machine's c++ is GCC's (Debian's alternatives)
  // Without the variables `kcache run` sets (a launcher the environment names is kept, with a
  // note on stderr).
  std::string clean = absl::StrCat("env ", testing::UnsetRoutedVariables());
  testing::RunResult env = testing::Run(absl::StrCat(
      clean, testing::KcacheCli(), " env --store ", env_.store, " --arch 8.9,9.0 --shims ", shims));
  ASSERT_EQ(env.exit_code, 0) << env.output;
  for (const std::string& line :
       {absl::StrCat("KCACHE_STORE=", env_.store), absl::StrCat("PYTORCH_NVCC=", shims, "/nvcc"),
        absl::StrCat("CXX=", shims, "/", cxx),
        absl::StrCat("CC=", shims, "/", ExpectedCompilerName("cc", "gcc")),
        std::string("TORCH_CUDA_ARCH_LIST=8.9;9.0"), std::string("TORCH_NO_COMPILER_WRAPPER=1")}) {
    EXPECT_TRUE(testing::Contains(env.output, line + "\n")) << line << "\n" << env.output;
  }
  EXPECT_EQ(fs::canonical(shims + "/nvcc"), fs::canonical(testing::KcacheLaunch()));
  testing::RunResult run = testing::Run(
      absl::StrCat(clean, testing::KcacheCli(), " run --store ", env_.store, " --arch 8.9 --shims ",
                   shims, " -- sh -c 'echo $CXX $TORCH_CUDA_ARCH_LIST $KCACHE_STORE'"));
  EXPECT_EQ(run.output, absl::StrCat(shims, "/", cxx, " 8.9 ", env_.store, "\n"));
  EXPECT_NE(testing::Run(absl::StrCat(testing::KcacheCli(), " env --arch 8.9")).exit_code, 0);
}

TEST_F(CompilerLauncherTest, EnvWithRedisRoutesInductorAndTritonToTheDoor) {
  std::string shims = tmp_ / "shims";
  std::string route = absl::StrCat(testing::KcacheCli(), " env --server unix:///k.sock --shims ",
                                   shims, " --redis ");
  testing::RunResult tcp = testing::Run(route + "127.0.0.1:6390");
  ASSERT_EQ(tcp.exit_code, 0) << tcp.output;
  for (const char* line :
       {"KCACHE_SERVER=unix:///k.sock", "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1",
        "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1", "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE=1",
        "TORCHINDUCTOR_REDIS_HOST=127.0.0.1", "TORCHINDUCTOR_REDIS_PORT=6390",
        "TRITON_CACHE_MANAGER=triton.runtime.cache:RemoteCacheManager",
        "TRITON_REMOTE_CACHE_BACKEND=kcache.triton:Backend", "KCACHE_REDIS_ADDR=127.0.0.1:6390"}) {
    EXPECT_TRUE(testing::Contains(tcp.output, absl::StrCat(line, "\n"))) << line << tcp.output;
  }
  testing::RunResult unix_socket = testing::Run(route + "unix:/run/kcache/redis.sock");
  EXPECT_TRUE(testing::Contains(unix_socket.output,
                                "TORCHINDUCTOR_REDIS_URL=unix:///run/kcache/redis.sock\n"))
      << unix_socket.output;
  EXPECT_FALSE(testing::Contains(unix_socket.output, "TORCHINDUCTOR_REDIS_HOST"));
  for (const char* bad : {"nowhere", "host:0", "unix:relative", ":6390"}) {
    testing::RunResult refused = testing::Run(route + bad);
    EXPECT_NE(refused.exit_code, 0) << bad;
    EXPECT_TRUE(testing::Contains(refused.output, "--redis-listen address")) << refused.output;
  }
  // --no-triton: Inductor's lines only, for a worker without the kcache package.
  testing::RunResult inductor_only = testing::Run(route + "127.0.0.1:6390 --no-triton");
  ASSERT_EQ(inductor_only.exit_code, 0) << inductor_only.output;
  EXPECT_TRUE(testing::Contains(inductor_only.output, "TORCHINDUCTOR_REDIS_PORT=6390\n"))
      << inductor_only.output;
  for (const char* absent :
       {"TRITON_CACHE_MANAGER", "TRITON_REMOTE_CACHE_BACKEND", "KCACHE_REDIS_ADDR"}) {
    EXPECT_FALSE(testing::Contains(inductor_only.output, absent)) << inductor_only.output;
  }
  EXPECT_NE(
      testing::Run(absl::StrCat(testing::KcacheCli(), " env --server unix:///k.sock --no-triton"))
          .exit_code,
      0)
      << "--no-triton without --redis";
  // --redis routes through a daemon: it needs --server.
  EXPECT_NE(testing::Run(absl::StrCat(testing::KcacheCli(), " env --store ", env_.store,
                                      " --redis 127.0.0.1:6390"))
                .exit_code,
            0);
}

TEST_F(CompilerLauncherTest, ExplainNamesTheChangedHeader) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  tmp_.Write("src/include/config.h", "#define ANSWER 43\n");
  std::string explain = absl::StrReplaceAll(Compile(), {{"$KCACHE c++", "$KCACHE explain -- c++"}});
  testing::RunResult result = RunIn(tmp_ / "b1", env_, explain);
  EXPECT_TRUE(
      testing::Contains(result.output, "miss: the command matches 1 recorded entry but header"))
      << result.output;
  EXPECT_TRUE(testing::Contains(result.output, "config.h changed")) << result.output;
}

}  // namespace
}  // namespace kcache
