// kcache's libnvrtc.so.13 stand-in (client/nvrtc, docs/nvrtc-standin.md) in the processes
// `kcache run` starts: it exports what the real NVRTC exports under its version node, needs
// only the C library, and a program linked with -lnvrtc or dlopening libnvrtc.so.13
// (tests/nvrtc/nvrtc_program.c) compiles through it exactly what it compiles without it, from
// 16 threads at once too; without a real NVRTC every call fails and says what to set. What a
// compile reads, as it records it, and the manifest made of that. Also what `kcache env` sets
// for it. The libnvrtc.so.12 stand-in the same, against the NVRTC 12.9 wheel: its exports, a
// program dlopening libnvrtc.so.12, where `kcache env` finds an NVRTC 12. The Python callers
// (cuda-python, cuda.core, torch) are tests/python/test_nvrtc_standin.py's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/keys/header_manifest.h"
#include "engine/nvrtc/nvrtc_compile.h"
#include "engine/observe/observe_log.h"
#include "engine/observe/observed_reads.h"
#include "tests/testutil/kcache_run.h"
#include "tests/testutil/nvrtc_programs.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::KcacheCli;
using testing::Occurrences;
using testing::RunResult;

constexpr char kRealNvrtc[] = "/usr/local/cuda/lib64/libnvrtc.so.13";
constexpr const char* kForwardedCompile = testing::kNvrtcForwarded;
constexpr char kNoRealNvrtc[] = "kcache: libnvrtc.so.13 stand-in: no real NVRTC (";

// The symbols NVRTC 13.2 added to 13.0's, which the stand-in exports beside the toolkit's.
const std::set<std::string> kSinceNvrtc13_2 = {"nvrtcGetTileIRSize@@libnvrtc.so.13",
                                               "nvrtcGetTileIR@@libnvrtc.so.13",
                                               "__nvrtcNvvmHandle@@libnvrtc.so.13"};

// The stand-in for NVRTC `major` beside the kcache under test.
std::string StandIn(int major = 13) {
  return (fs::path(KcacheCli()).parent_path() / "nvrtc" / absl::StrCat("libnvrtc.so.", major))
      .string();
}

// Whether `output` has `line` as a whole line.
bool HasLine(const std::string& output, const std::string& line) {
  return Contains(absl::StrCat("\n", output), absl::StrCat("\n", line, "\n"));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// `nm -D --defined-only` of `library`: its functions, "name@@version" each.
std::set<std::string> Exports(const std::string& library) {
  std::set<std::string> names;
  RunResult nm = testing::Run(absl::StrCat("nm -D --defined-only ", library));
  for (absl::string_view line : absl::StrSplit(nm.output, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() == 3 && fields[1] == "T") names.insert(fields[2]);
  }
  return names;
}

class NvrtcStandInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(StandIn())) GTEST_SKIP() << "no NVRTC stand-in at " << StandIn();
    if (!fs::exists(kRealNvrtc)) GTEST_SKIP() << "no NVRTC at " << kRealNvrtc;
  }

  // `command` with none of the variables `kcache run` sets, CUDA_HOME naming kRealNvrtc's
  // toolkit (so that the toolkit kcache finds does not depend on the test's PATH: a
  // /usr/local/bin/nvcc wrapper makes it /usr/local), and `assignments` (which may set another).
  RunResult Plain(const std::string& assignments, const std::string& command) {
    return testing::Run(absl::StrCat("env ", testing::UnsetRoutedVariables(), "CUDA_HOME=",
                                     fs::path(kRealNvrtc).parent_path().parent_path().string(), " ",
                                     assignments, " ", command));
  }

  // `command` under `kcache run` (KCACHE_LOG=1), with `assignments` before it.
  RunResult UnderKcache(const std::string& command, const std::string& assignments = "",
                        const std::string& flags = "") {
    return Plain(absl::StrCat("KCACHE_LOG=1 KCACHE_STATE_DIR=", tmp_ / "state", " ", assignments),
                 absl::StrCat(KcacheCli(), " run --store ", tmp_ / "store", " --shims ",
                              tmp_ / "shims", " ", flags, " -- ", command));
  }

  // `kcache env` (one NAME=VALUE a line) with `assignments` before it, and a PATH and HOME
  // without a Python environment holding an NVRTC 12 (unless `assignments` sets them).
  RunResult Env(const std::string& assignments, const std::string& flags = "") {
    return Plain(absl::StrCat("KCACHE_STATE_DIR=", tmp_ / "state",
                              " PATH=/usr/bin:/bin HOME=", Dir("home"), " ", assignments),
                 absl::StrCat(KcacheCli(), " env --store ", tmp_ / "store", " --shims ",
                              tmp_ / "shims", " ", flags));
  }

  // Whether `output` says nvrtcCompileProgram was found in the stand-in ("nvrtc: PATH").
  static bool ThroughStandIn(const std::string& output, int major = 13) {
    std::string lines = absl::StrCat("\n", output);
    size_t at = lines.find("\nnvrtc: ");
    if (at == std::string::npos) return false;
    std::string path = lines.substr(at + 8, lines.find('\n', at + 1) - at - 8);
    std::error_code ec;
    return fs::equivalent(path, StandIn(major), ec);
  }

  // Compiles with `program` without and with the stand-in for NVRTC `major` (by `kcache run`,
  // and by the variables `kcache env --export` prints), and expects the same PTX, CUBIN, log and
  // names. NVRTC 13 is the one LD_LIBRARY_PATH leads to, in both (the stand-in forwards to what
  // the process would load); NVRTC 12 is the wheel's (KCACHE_REAL_NVRTC_12).
  void ExpectTheSameOutputs(const std::string& program, int major = 13) {
    std::string real = major == 13 ? kRealNvrtc : testing::WheelNvrtc12();
    if (!fs::exists(real)) GTEST_SKIP() << "no " << real << ": run scripts/install-deps.sh";
    std::string routed =
        major == 13 ? absl::StrCat("LD_LIBRARY_PATH=", fs::path(real).parent_path().string())
                    : absl::StrCat("KCACHE_REAL_NVRTC_12=", real);
    RunResult direct =
        Plain(absl::StrCat("LD_LIBRARY_PATH=", fs::path(real).parent_path().string()),
              absl::StrCat(program, " compile ", Dir("direct")));
    ASSERT_EQ(direct.exit_code, 0) << direct.output;
    EXPECT_FALSE(ThroughStandIn(direct.output, major)) << direct.output;

    RunResult run = UnderKcache(absl::StrCat(program, " compile ", Dir("run")), routed);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(ThroughStandIn(run.output, major)) << run.output;
    EXPECT_EQ(Occurrences(run.output, absl::StrCat(kForwardedCompile, real)), 2) << run.output;
    EXPECT_EQ(Occurrences(run.output, "NVRTC_SUCCESS"), 2) << run.output;

    RunResult env = Plain(absl::StrCat("KCACHE_STATE_DIR=", tmp_ / "state", " ", routed),
                          absl::StrCat("sh -c 'eval \"$(", KcacheCli(), " env --export --store ",
                                       tmp_ / "store", " --shims ", tmp_ / "shims", ")\" && ",
                                       program, " compile ", Dir("env"), "'"));
    ASSERT_EQ(env.exit_code, 0) << env.output;
    EXPECT_TRUE(ThroughStandIn(env.output, major)) << env.output;

    for (const char* file : {"ptx", "cubin", "log", "names", "nulls"}) {
      std::string expected = ReadFile(tmp_ / absl::StrCat("direct/", file));
      if (std::string(file) != "log") {
        EXPECT_FALSE(expected.empty()) << file;
      }
      EXPECT_EQ(ReadFile(tmp_ / absl::StrCat("run/", file)), expected) << file;
      EXPECT_EQ(ReadFile(tmp_ / absl::StrCat("env/", file)), expected) << file;
    }
    EXPECT_TRUE(Contains(ReadFile(tmp_ / "direct/names"), "scale<float> _Z5scaleIf"))
        << ReadFile(tmp_ / "direct/names");
  }

  std::string Dir(const std::string& name) {
    fs::create_directories(tmp_ / name);
    return tmp_ / name;
  }

  fs::path IncludeDirs() { return testing::MakeIncludeDirs(Dir("inc")); }

  // Runs `nvrtc_linked_program includes DIR` under kcache run and returns the one compile's
  // record from $KCACHE_NVRTC_READS_LOG, parsed (all of the log in *text).
  observe::ObservedReads RecordIncludes(const fs::path& inc, std::string* text) {
    fs::path log = tmp_ / "reads.log";
    fs::remove(log);
    RunResult run = UnderKcache(
        absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"), " includes ", inc.string()),
        absl::StrCat("KCACHE_NVRTC_READS_LOG=", log.string()));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(ThroughStandIn(run.output)) << run.output;
    EXPECT_TRUE(Contains(run.output, "the other thread read ")) << run.output;
    *text = ReadFile(log);
    EXPECT_EQ(Occurrences(*text, "# nvrtc compile "), 1) << *text;
    EXPECT_EQ(Occurrences(*text, "\n# end\n"), 1) << *text;
    EXPECT_FALSE(Contains(*text, "incomplete")) << *text;
    std::string record;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      if (!absl::StartsWith(line, "#")) absl::StrAppend(&record, line, "\n");
    }
    observe::ObservedReads reads = observe::ParseObservation(record);
    EXPECT_EQ(reads.damaged_lines, 0u) << *text;
    return reads;
  }

  testing::TempDir tmp_;
};

TEST_F(NvrtcStandInTest, ExportsEveryRealNvrtcSymbolUnderItsVersionNode) {
  std::set<std::string> ours = Exports(StandIn()), real = Exports(kRealNvrtc);
  ASSERT_FALSE(real.empty());
  for (const std::string& name : real) {
    EXPECT_TRUE(ours.count(name)) << "the real NVRTC exports " << name
                                  << ", the stand-in does not: add it to "
                                     "client/nvrtc/nvrtc_entries.h";
  }
  for (const std::string& name : ours) {
    EXPECT_TRUE(real.count(name) || kSinceNvrtc13_2.count(name))
        << "the stand-in exports " << name << ", which no NVRTC 13 does";
  }
  EXPECT_EQ(ours.size(), 28u);
}

// NVRTC 12's stand-in exports exactly what NVRTC 12.9 does, under its version node: its
// nvrtcGetNVVM pair, none of 13's additions.
TEST_F(NvrtcStandInTest, StandInFor12ExportsWhatNvrtc12Exports) {
  if (!fs::exists(testing::WheelNvrtc12())) {
    GTEST_SKIP() << "no NVRTC 12.9 wheel in .venv: run scripts/install-deps.sh";
  }
  std::set<std::string> ours = Exports(StandIn(12)), real = Exports(testing::WheelNvrtc12());
  EXPECT_EQ(ours, real);
  EXPECT_TRUE(ours.count("nvrtcGetNVVM@@libnvrtc.so.12"));
  EXPECT_EQ(ours.size(), 27u);
}

TEST_F(NvrtcStandInTest, HasNvrtcsSonameAndNeedsOnlyTheCLibrary) {
  for (int major : {13, 12}) {
    RunResult dynamic = testing::Run(absl::StrCat("readelf -d ", StandIn(major)));
    ASSERT_EQ(dynamic.exit_code, 0) << dynamic.output;
    EXPECT_TRUE(Contains(dynamic.output, absl::StrCat("Library soname: [libnvrtc.so.", major, "]")))
        << dynamic.output;
    const std::set<std::string> allowed = {"libc.so.6", "libdl.so.2", "libpthread.so.0"};
    for (absl::string_view line : absl::StrSplit(dynamic.output, '\n')) {
      size_t at = line.find("Shared library: [");
      if (at == absl::string_view::npos) continue;
      std::string needed(line.substr(at + 17, line.find(']', at) - at - 17));
      EXPECT_TRUE(allowed.count(needed)) << "the stand-in needs " << needed;
    }
  }
  // No libnvrtc.so link that a -lnvrtc could pick up.
  EXPECT_FALSE(fs::exists(fs::path(StandIn()).parent_path() / "libnvrtc.so"));
}

TEST_F(NvrtcStandInTest, ProgramLinkedWithNvrtcCompilesTheSameThroughIt) {
  ExpectTheSameOutputs(testing::NvrtcProgram("nvrtc_linked_program"));
}

TEST_F(NvrtcStandInTest, ProgramDlopeningNvrtcCompilesTheSameThroughIt) {
  ExpectTheSameOutputs(testing::NvrtcProgram("nvrtc_dlopen_program"));
}

TEST_F(NvrtcStandInTest, ProgramDlopeningNvrtc12CompilesTheSameThroughItsStandIn) {
  ExpectTheSameOutputs(testing::NvrtcProgram("nvrtc12_dlopen_program"), 12);
}

TEST_F(NvrtcStandInTest, SixteenThreadsCompileAtOnceThroughIt) {
  RunResult direct = Plain("", absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"),
                                            " threads 1 ", Dir("direct")));
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  RunResult run = UnderKcache(
      absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"), " threads 16 ", Dir("run")));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(ThroughStandIn(run.output)) << run.output;
  // Each compile forwarded, or served from the store once another thread's is stored there.
  int forwarded = Occurrences(run.output, kForwardedCompile);
  EXPECT_GE(forwarded, 1) << run.output;
  EXPECT_EQ(forwarded + Occurrences(run.output, testing::kNvrtcServed), 16) << run.output;
  EXPECT_EQ(Occurrences(run.output, "kcache: nvrtc: forwarding to "), 1) << run.output;
  EXPECT_EQ(ReadFile(tmp_ / "run/ptx"), ReadFile(tmp_ / "direct/ptx"));
}

// What the real NVRTC read while it compiled (client/nvrtc/nvrtc_reads.h), as the stand-in
// appends it to $KCACHE_NVRTC_READS_LOG: the header found in the second -I directory and its
// absence from the first, what NVRTC asked of the environment; and nothing of what another
// thread of the program read at the same time.
TEST_F(NvrtcStandInTest, RecordsWhatTheCompileReadAndNotWhatOtherThreadsRead) {
  fs::path inc = IncludeDirs();
  std::string text;
  observe::ObservedReads reads = RecordIncludes(inc, &text);
  auto has = [&](char kind, const fs::path& path) {
    for (const observe::PathFact& fact : reads.facts) {
      if (fact.kind == kind && fact.path == path.string()) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(KCACHE_OBSERVE_READ, inc / "b/hdr.h")) << text;
  EXPECT_TRUE(has(KCACHE_OBSERVE_ABSENT, inc / "a/hdr.h")) << text;
  EXPECT_FALSE(Contains(text, (inc / "unrelated").string())) << text;
  bool asked_append_flags = false;
  for (const observe::EnvRead& read : reads.env) {
    asked_append_flags |= read.name == "NVRTC_APPEND_FLAGS";
  }
  EXPECT_TRUE(asked_append_flags) << text;
  EXPECT_TRUE(reads.unobservable.empty()) << text;
  EXPECT_TRUE(reads.written.empty()) << text;
}

// The manifest of a real compile's record (engine/nvrtc/nvrtc_compile.h) holds here, and stops
// holding when the header read changes, when a header of that name appears in the -I directory
// searched first, and when NVRTC_APPEND_FLAGS, which NVRTC read unset, is set.
TEST_F(NvrtcStandInTest, ManifestOfARecordMissesWhenWhatTheCompileReadChanges) {
  fs::path inc = IncludeDirs();
  std::string text;
  observe::ObservedReads reads = RecordIncludes(inc, &text);
  objects::BaseDirs dirs{fs::current_path().string(), {}};
  objects::FileDigests digests("");
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<HeaderManifest> manifest =
      objects::NvrtcManifest(reads, dirs, {}, digests, absl::InfiniteFuture(), &reason);
  ASSERT_TRUE(manifest.ok()) << manifest.status() << "\n" << text;
  auto holds = [&](const objects::Environment& env, std::string* difference) {
    objects::FileDigests fresh("");
    return objects::ManifestMatches(*manifest, dirs, env, fresh, difference);
  };
  std::string difference;
  EXPECT_TRUE(holds({}, &difference)) << difference;

  std::ofstream(inc / "b/hdr.h") << "constexpr float kValue = 4.0f;\n";
  EXPECT_FALSE(holds({}, &difference));
  EXPECT_TRUE(Contains(difference, "b/hdr.h")) << difference;
  std::ofstream(inc / "b/hdr.h") << "constexpr float kValue = 3.0f;\n";
  EXPECT_TRUE(holds({}, &difference)) << difference;

  std::ofstream(inc / "a/hdr.h") << "constexpr float kValue = 5.0f;\n";
  EXPECT_FALSE(holds({}, &difference));
  EXPECT_TRUE(Contains(difference, "a/hdr.h")) << difference;
  fs::remove(inc / "a/hdr.h");
  EXPECT_TRUE(holds({}, &difference)) << difference;

  EXPECT_FALSE(holds({{"NVRTC_APPEND_FLAGS", "-DkValue=0"}}, &difference));
  EXPECT_TRUE(Contains(difference, "NVRTC_APPEND_FLAGS")) << difference;
}

TEST_F(NvrtcStandInTest, WithoutARealNvrtcEveryCallFailsAndSaysWhatToSet) {
  fs::create_symlink(StandIn(), tmp_ / "link-to-stand-in.so");
  for (const std::string& real : {tmp_ / "absent.so", StandIn(), tmp_ / "link-to-stand-in.so"}) {
    for (const char* program : {"nvrtc_linked_program", "nvrtc_dlopen_program"}) {
      RunResult missing = Plain(absl::StrCat("LD_PRELOAD=", StandIn(), " KCACHE_REAL_NVRTC=", real),
                                absl::StrCat(testing::NvrtcProgram(program), " missing"));
      EXPECT_EQ(missing.exit_code, 0) << missing.output;
      EXPECT_EQ(Occurrences(missing.output, kNoRealNvrtc), 1) << missing.output;
      EXPECT_TRUE(Contains(missing.output, "set KCACHE_REAL_NVRTC")) << missing.output;
      EXPECT_TRUE(Contains(missing.output, "message: NVRTC_ERROR_INTERNAL_ERROR (kcache's"))
          << missing.output;
      if (real != tmp_ / "absent.so") {
        EXPECT_TRUE(Contains(missing.output, "is this stand-in, not the real NVRTC"))
            << missing.output;
      }
    }
  }
  // The undocumented entries answer their fallbacks: an error, and no function.
  RunResult internals =
      Plain(absl::StrCat("LD_PRELOAD=", StandIn(), " KCACHE_REAL_NVRTC=", tmp_ / "absent.so"),
            absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"), " internals"));
  EXPECT_EQ(internals.exit_code, 0) << internals.output;
  EXPECT_EQ(Occurrences(internals.output, "__nvrtcCPEx: 11\n"), 2) << internals.output;
  EXPECT_EQ(Occurrences(internals.output, "__nvrtcNvvmHandle(0x4321): NULL\n"), 2)
      << internals.output;
}

TEST_F(NvrtcStandInTest, UndocumentedEntriesJumpToTheRealOnes) {
  // __nvrtcCPEx refuses a null program with NVRTC_ERROR_INVALID_PROGRAM (4), the first call
  // through the stand-in's resolving path, the second through its jump.
  RunResult direct =
      Plain("", absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"), " internals"));
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  EXPECT_EQ(Occurrences(direct.output, "__nvrtcCPEx: 4\n"), 2) << direct.output;
  RunResult forwarded =
      Plain(absl::StrCat("LD_PRELOAD=", StandIn(), " KCACHE_REAL_NVRTC=", kRealNvrtc),
            absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"), " internals"));
  ASSERT_EQ(forwarded.exit_code, 0) << forwarded.output;
  EXPECT_TRUE(ThroughStandIn(forwarded.output)) << forwarded.output;
  EXPECT_EQ(Occurrences(forwarded.output, "__nvrtcCPEx: 4\n"), 2) << forwarded.output;
  // NVRTC 13.0 has no __nvrtcNvvmHandle: the stand-in's answers NULL and says so once.
  EXPECT_EQ(Occurrences(forwarded.output, "has no __nvrtcNvvmHandle"), 1) << forwarded.output;
}

// Without KCACHE_REAL_NVRTC the stand-in forwards to the NVRTC the process would have loaded
// without it, as the loader finds one: a program linked with RUNPATH /usr/local/cuda/lib64
// takes LD_LIBRARY_PATH's first, as without the stand-in (the program says which file its
// nvrtcCompileProgram is in); a candidate that is the stand-in is passed over for the next;
// a program that dlopens "libnvrtc.so.13" with nothing else gets the loader cache's.
TEST_F(NvrtcStandInTest, WithoutKcacheRealNvrtcItTakesWhatTheProcessWouldLoad) {
  fs::create_directories(tmp_ / "cuda");
  fs::create_symlink("/usr/local/cuda/lib64", tmp_ / "cuda/lib64");
  std::string program = testing::NvrtcProgram("nvrtc_linked_program");
  std::string library_path = absl::StrCat("LD_LIBRARY_PATH=", tmp_ / "cuda/lib64");
  RunResult without = Plain(library_path, absl::StrCat(program, " compile ", Dir("without")));
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_TRUE(Contains(without.output, absl::StrCat("nvrtc: ", tmp_ / "cuda/lib64")))
      << without.output;
  RunResult found = Plain(absl::StrCat("KCACHE_LOG=1 LD_PRELOAD=", StandIn(), " ", library_path),
                          absl::StrCat(program, " compile ", Dir("out")));
  ASSERT_EQ(found.exit_code, 0) << found.output;
  EXPECT_TRUE(Contains(found.output, absl::StrCat("kcache: nvrtc: forwarding to ", tmp_ / "cuda",
                                                  "/lib64/libnvrtc.so.13 (NVRTC 13.")))
      << found.output;

  // A directory whose libnvrtc.so.13 is the stand-in is passed over for the next candidate
  // (the program's RUNPATH).
  fs::create_directories(tmp_ / "loop/lib64");
  fs::create_symlink(StandIn(), tmp_ / "loop/lib64/libnvrtc.so.13");
  RunResult looped = Plain(
      absl::StrCat("KCACHE_LOG=1 LD_PRELOAD=", StandIn(), " LD_LIBRARY_PATH=", tmp_ / "loop/lib64"),
      absl::StrCat(program, " compile ", Dir("looped")));
  ASSERT_EQ(looped.exit_code, 0) << looped.output;
  EXPECT_TRUE(Contains(looped.output, "forwarding to /usr/local/cuda/lib64/libnvrtc.so.13"))
      << looped.output;

  // dlopen("libnvrtc.so.13") from a program with no RUNPATH: the loader's cache, as ldconfig -p
  // lists it.
  RunResult cache = testing::Run("/sbin/ldconfig -p | grep -m1 'libnvrtc.so.13 (libc6,x86-64)'");
  if (cache.exit_code == 0) {
    std::string cached = cache.output.substr(cache.output.find("=> ") + 3);
    cached = cached.substr(0, cached.find('\n'));
    RunResult dlopened = Plain(
        absl::StrCat("KCACHE_LOG=1 LD_PRELOAD=", StandIn()),
        absl::StrCat(testing::NvrtcProgram("nvrtc_dlopen_program"), " compile ", Dir("dlopened")));
    ASSERT_EQ(dlopened.exit_code, 0) << dlopened.output;
    EXPECT_TRUE(Contains(dlopened.output, absl::StrCat("forwarding to ", cached, " (NVRTC 13.")))
        << dlopened.output << "\nldconfig: " << cached;
    // LD_LIBRARY_PATH set by the process after it started: the loader never reads it, so
    // neither does the stand-in.
    RunResult late = Plain(
        absl::StrCat("KCACHE_LOG=1 LD_PRELOAD=", StandIn()),
        absl::StrCat("/usr/bin/python3 -c \"import ctypes, os; os.environ['LD_LIBRARY_PATH'] = '",
                     tmp_ / "cuda/lib64", "'; l = ctypes.CDLL('libnvrtc.so.13'); ",
                     "a, b = ctypes.c_int(), ctypes.c_int(); ",
                     "l.nvrtcVersion(ctypes.byref(a), ctypes.byref(b))\""));
    ASSERT_EQ(late.exit_code, 0) << late.output;
    EXPECT_TRUE(Contains(late.output, absl::StrCat("forwarding to ", cached, " (NVRTC 13.")))
        << late.output;
  }
}

TEST_F(NvrtcStandInTest, KcacheEnvAppendsItToLdPreloadNamingNoRealNvrtc) {
  std::string libm = "/lib/x86_64-linux-gnu/libm.so.6";
  RunResult env = Env(absl::StrCat("LD_PRELOAD=", libm));
  ASSERT_EQ(env.exit_code, 0) << env.output;
  std::string stand_in = fs::weakly_canonical(StandIn()).string();
  EXPECT_TRUE(HasLine(env.output, absl::StrCat("LD_PRELOAD=", libm, ":", stand_in))) << env.output;
  // Each process's stand-in finds its own real NVRTC: kcache env names none.
  EXPECT_FALSE(Contains(env.output, "KCACHE_REAL_NVRTC=")) << env.output;

  // A real NVRTC the environment names is kept; one that is the stand-in is not.
  std::string copy = tmp_.Write("real/libnvrtc.so.13", "");
  RunResult kept = Env(absl::StrCat("KCACHE_REAL_NVRTC=", copy));
  EXPECT_TRUE(HasLine(kept.output, absl::StrCat("KCACHE_REAL_NVRTC=", copy))) << kept.output;
  RunResult refused = Env(absl::StrCat("KCACHE_REAL_NVRTC=", StandIn()));
  EXPECT_TRUE(Contains(refused.output, "is not kept: it is kcache's stand-in")) << refused.output;
  EXPECT_FALSE(Contains(refused.output, "KCACHE_REAL_NVRTC=")) << refused.output;

  // A nested run keeps LD_PRELOAD as it is; --no-nvrtc takes the stand-in out of it.
  RunResult nested =
      Env(absl::StrCat("LD_PRELOAD=", libm, ":", StandIn(), " KCACHE_REAL_NVRTC=", kRealNvrtc));
  EXPECT_FALSE(Contains(absl::StrCat("\n", nested.output), "\nLD_PRELOAD=")) << nested.output;
  RunResult off = Env(absl::StrCat("LD_PRELOAD=", libm, ":", StandIn()), "--no-nvrtc");
  EXPECT_TRUE(HasLine(off.output, absl::StrCat("LD_PRELOAD=", libm))) << off.output;
  EXPECT_FALSE(Contains(off.output, "KCACHE_REAL_NVRTC=")) << off.output;

  // Under `kcache run --no-nvrtc`, NVRTC is the real one.
  RunResult plain = UnderKcache(
      absl::StrCat(testing::NvrtcProgram("nvrtc_linked_program"), " compile ", Dir("off")), "",
      "--no-nvrtc");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_FALSE(ThroughStandIn(plain.output)) << plain.output;
  EXPECT_FALSE(Contains(plain.output, kForwardedCompile)) << plain.output;
  EXPECT_TRUE(
      Contains(testing::Run(absl::StrCat(KcacheCli(), " run --help")).output, "--no-nvrtc"));
}

// `kcache env` routes NVRTC 12 when there is one: the wheel of PATH's Python environment (a
// virtual environment laid out as venv makes one), else none; a KCACHE_REAL_NVRTC_12 the
// environment names is kept; --no-nvrtc takes both stand-ins out.
TEST_F(NvrtcStandInTest, KcacheEnvRoutesNvrtc12FromPathsPythonEnvironment) {
  if (!fs::exists(testing::WheelNvrtc12())) {
    GTEST_SKIP() << "no NVRTC 12.9 wheel in .venv: run scripts/install-deps.sh";
  }
  std::string stand_in = fs::weakly_canonical(StandIn()).string();
  std::string stand_in12 = fs::weakly_canonical(StandIn(12)).string();
  RunResult none = Env("");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_TRUE(HasLine(none.output, absl::StrCat("LD_PRELOAD=", stand_in))) << none.output;
  EXPECT_FALSE(Contains(none.output, "KCACHE_REAL_NVRTC_12=")) << none.output;

  fs::path venv = Dir("venv");
  tmp_.Write("venv/bin/python3", "#!/bin/sh\n");
  fs::permissions(venv / "bin/python3", fs::perms::owner_all);
  fs::path wheel = venv / "lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12";
  fs::create_directories(wheel.parent_path());
  fs::create_symlink(testing::WheelNvrtc12(), wheel);
  RunResult found = Env(absl::StrCat("PATH=", (venv / "bin").string(), ":/usr/bin"));
  ASSERT_EQ(found.exit_code, 0) << found.output;
  EXPECT_TRUE(HasLine(found.output, absl::StrCat("LD_PRELOAD=", stand_in, ":", stand_in12)))
      << found.output;
  EXPECT_FALSE(Contains(found.output, "KCACHE_REAL_NVRTC_12=")) << found.output;

  RunResult named = Env(absl::StrCat("KCACHE_REAL_NVRTC_12=", testing::WheelNvrtc12()));
  EXPECT_TRUE(HasLine(named.output, absl::StrCat("KCACHE_REAL_NVRTC_12=", testing::WheelNvrtc12())))
      << named.output;

  std::string libm = "/lib/x86_64-linux-gnu/libm.so.6";
  RunResult off =
      Env(absl::StrCat("LD_PRELOAD=", libm, ":", StandIn(), ":", StandIn(12)), "--no-nvrtc");
  EXPECT_TRUE(HasLine(off.output, absl::StrCat("LD_PRELOAD=", libm))) << off.output;
  EXPECT_FALSE(Contains(off.output, "KCACHE_REAL_NVRTC")) << off.output;
}

}  // namespace
}  // namespace kcache
