// `kcache run` and `kcache env` route every way a build finds nvcc and the host compilers
// through kcache (client/cli/run_environment.h), with the real compilers: the variables and
// the paths they name, the shim toolkit root (the real toolkit's headers, libraries and
// version.json through it, its nvcc served), another nvcc first in PATH (it runs, and misses),
// a compiler the environment names that no link runs (kept), nested runs, and --check.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/library_build.h"
#include "tests/testutil/kcache_run.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::Occurrences;
using testing::RunResult;
using testing::RunUnderKcache;

constexpr char kRealNvcc[] = "/usr/local/cuda/bin/nvcc";
// PATH with the real nvcc in it, whatever the test's own PATH holds.
constexpr char kNvccInPath[] = "PATH=/usr/local/cuda/bin:$PATH";

// A kernel with a second one only when WRAPPED is defined (by the wrapper nvcc below).
constexpr char kKernel[] = R"(#ifdef WRAPPED
__global__ void wrapped_kernel(int* p) { *p = 2; }
#endif
__global__ void plain_kernel(int* p) { *p = 1; }
)";

class RunEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kRealNvcc)) GTEST_SKIP() << "no nvcc at " << kRealNvcc;
    tmp_.Write("src/k.cu", kKernel);
  }

  // `kcache env` (or `env --export`) with the clean environment, `assignments` and `flags`.
  RunResult Env(const std::string& assignments, const std::string& flags = "") {
    return testing::Run(absl::StrCat("env ", testing::UnsetRoutedVariables(),
                                     "KCACHE_STATE_DIR=", tmp_ / "state", " ", assignments, " ",
                                     testing::KcacheCli(), " env --store ", tmp_ / "store",
                                     " --shims ", tmp_ / "shims", " ", flags));
  }

  static std::map<std::string, std::string> Variables(const std::string& output) {
    std::map<std::string, std::string> vars;
    for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
      size_t eq = line.find('=');
      if (eq != absl::string_view::npos && !absl::StartsWith(line, "kcache:")) {
        vars[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
      }
    }
    return vars;
  }

  // A toolkit root of its own: the real one's bin, include, lib64 and nvvm through links, and
  // a version.json (the real one here has none).
  std::string MakeToolkit() {
    std::string root = tmp_ / "cuda";
    fs::create_directories(root);
    for (const char* entry : {"bin", "include", "lib64", "nvvm"}) {
      fs::create_symlink(fs::path("/usr/local/cuda") / entry, fs::path(root) / entry);
    }
    tmp_.Write("cuda/version.json", "{\"cuda\": {\"name\": \"test toolkit\"}}\n");
    return root;
  }

  // A toolkit root whose bin/nvcc is a wrapper script: the real nvcc with -DWRAPPED=1.
  std::string MakeWrapperToolkit() {
    std::string nvcc = tmp_.Write(
        "wrapcuda/bin/nvcc", absl::StrCat("#!/bin/sh\nexec ", kRealNvcc, " -DWRAPPED=1 \"$@\"\n"));
    fs::permissions(nvcc, fs::perms::owner_all);
    return tmp_ / "wrapcuda";
  }

  std::string Symbols(const std::string& object) {
    return testing::Run(absl::StrCat("nm ", object)).output;
  }

  testing::TempDir tmp_;
};

TEST_F(RunEnvironmentTest, EnvPrintsEveryVariableEachNamingWhatExists) {
  std::string root = MakeToolkit();
  RunResult env = Env(absl::StrCat("CUDA_HOME=", root, " ", kNvccInPath), "--arch 8.9,9.0");
  ASSERT_EQ(env.exit_code, 0) << env.output;
  std::map<std::string, std::string> vars = Variables(env.output);
  std::string shims = tmp_ / "shims";
  for (const char* name :
       {"KCACHE_STORE", "PYTORCH_NVCC", "CXX", "CC", "TORCH_NO_COMPILER_WRAPPER",
        "TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST", "PATH", "CUDA_HOME", "CUDA_PATH",
        "KCACHE_REAL_CUDA_HOME", "DG_JIT_NVCC_COMPILER", "CMAKE_CUDA_COMPILER_LAUNCHER", "CUDACXX",
        "FLASHINFER_NVCC_LAUNCHER", "FLASHINFER_NVCC", "CMAKE_CXX_COMPILER_LAUNCHER",
        "CMAKE_C_COMPILER_LAUNCHER", "FLASHINFER_CXX_LAUNCHER"}) {
    EXPECT_TRUE(vars.count(name)) << name << " missing:\n" << env.output;
  }
  EXPECT_EQ(vars["TORCH_CUDA_ARCH_LIST"], "8.9;9.0");
  EXPECT_EQ(vars["FLASHINFER_CUDA_ARCH_LIST"], "8.9 9.0");
  EXPECT_EQ(vars["KCACHE_REAL_CUDA_HOME"], root);
  EXPECT_EQ(vars["CUDA_HOME"], vars["CUDA_PATH"]);
  EXPECT_EQ(fs::path(vars["CUDA_HOME"]).parent_path(), shims);
  // PATH's nvcc is the toolkit's (through the links): the shims directory with nvcc comes first.
  EXPECT_TRUE(absl::StartsWith(vars["PATH"], shims + ":")) << vars["PATH"];
  // The compiler variables name links to kcache-launch; the launchers name kcache-launch,
  // and the nvcc a launcher is put in front of is the toolkit's real one.
  fs::path launch = fs::canonical(testing::KcacheLaunch());
  for (const char* name : {"PYTORCH_NVCC", "CXX", "CC", "DG_JIT_NVCC_COMPILER"}) {
    EXPECT_EQ(fs::canonical(vars[name]), launch) << name;
  }
  EXPECT_EQ(fs::canonical(vars["CUDA_HOME"] + "/bin/nvcc"), launch);
  for (const char* name :
       {"CMAKE_CUDA_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_C_COMPILER_LAUNCHER",
        "FLASHINFER_NVCC_LAUNCHER", "FLASHINFER_CXX_LAUNCHER"}) {
    EXPECT_EQ(fs::canonical(vars[name]), launch) << name;
  }
  for (const char* name : {"CUDACXX", "FLASHINFER_NVCC"}) {
    EXPECT_EQ(vars[name], root + "/bin/nvcc") << name;
  }

  // --export: the same, each line one a shell evaluates.
  RunResult exported = testing::Run(
      absl::StrCat("eval \"$(env ", testing::UnsetRoutedVariables(),
                   "KCACHE_STATE_DIR=", tmp_ / "state", " CUDA_HOME=", root, " ", kNvccInPath, " ",
                   testing::KcacheCli(), " env --export --store ", tmp_ / "store", " --shims ",
                   tmp_ / "shims", " --arch 8.9,9.0)\" && echo \"$FLASHINFER_CUDA_ARCH_LIST|",
                   "$KCACHE_REAL_CUDA_HOME\" && command -v nvcc"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(exported.output, absl::StrCat("8.9 9.0|", root, "\n", shims, "/nvcc\n"));
}

TEST_F(RunEnvironmentTest, ShimToolkitServesTheRealToolkitAndItsNvcc) {
  std::string root = MakeToolkit();
  tmp_.Write("src/runtime.cpp",
             "#include <cuda_runtime.h>\nint main() { int v = 0; "
             "return cudaRuntimeGetVersion(&v) == cudaSuccess && v > 0 ? 0 : 1; }\n");
  std::string script = absl::StrCat(
      "set -e\n"
      "test \"$CUDA_HOME\" != ",
      root,
      "\n"
      "test -f \"$CUDA_HOME/include/cuda_runtime.h\"\n"
      "ls \"$CUDA_HOME/lib64/\" | grep -q '^libcudart.so'\n"
      "cat \"$CUDA_HOME/version.json\"\n"
      "\"$CUDA_HOME/bin/nvcc\" --version > version.txt\n"
      "$CXX -I\"$CUDA_HOME/include\" ",
      tmp_ / "src/runtime.cpp",
      " -L\"$CUDA_HOME/lib64\" -lcudart -o runtime\n"
      "LD_LIBRARY_PATH=\"$CUDA_HOME/lib64\" ./runtime\n"
      "\"$CUDA_HOME/bin/nvcc\" -c ",
      tmp_ / "src/k.cu", " -o k.o\n");
  std::string assign = absl::StrCat("CUDA_HOME=", root, " ", kNvccInPath);
  RunResult first = RunUnderKcache(tmp_, "b1", script, assign);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(Contains(first.output, "test toolkit")) << first.output;
  EXPECT_EQ(testing::ReadAll(tmp_ / "b1/version.txt"),
            testing::Run(absl::StrCat(kRealNvcc, " --version")).output);
  EXPECT_EQ(Occurrences(first.output, "kcache: miss " + tmp_ / "src/k.cu"), 1) << first.output;
  RunResult second = RunUnderKcache(tmp_, "b2", script, assign);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(Occurrences(second.output, "kcache: hit " + tmp_ / "src/k.cu"), 1) << second.output;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/k.o", tmp_ / "b2/k.o"));
}

TEST_F(RunEnvironmentTest, AnotherNvccFirstInPathRunsAndMisses) {
  std::string compile = absl::StrCat("nvcc -c ", tmp_ / "src/k.cu", " -o k.o\n");
  std::string subject = "kcache: miss " + tmp_ / "src/k.cu";
  RunResult real = RunUnderKcache(tmp_, "real", compile,
                                  absl::StrCat("CUDA_HOME=/usr/local/cuda ", kNvccInPath));
  ASSERT_EQ(real.exit_code, 0) << real.output;
  EXPECT_EQ(Occurrences(real.output, subject), 1) << real.output;
  EXPECT_FALSE(Contains(Symbols(tmp_ / "real/k.o"), "wrapped_kernel"));

  // No CUDA_HOME: the toolkit is the one above PATH's first nvcc, the wrapper's, as torch
  // finds it; the launchers run the wrapper, which is keyed: a miss, then a hit.
  std::string wrapper_path =
      absl::StrCat("PATH=", MakeWrapperToolkit(), "/bin:/usr/local/cuda/bin:$PATH");
  RunResult wrapped = RunUnderKcache(tmp_, "wrapped", compile, wrapper_path);
  ASSERT_EQ(wrapped.exit_code, 0) << wrapped.output;
  EXPECT_EQ(Occurrences(wrapped.output, subject), 1) << wrapped.output;
  EXPECT_TRUE(Contains(Symbols(tmp_ / "wrapped/k.o"), "wrapped_kernel"));
  RunResult again = RunUnderKcache(tmp_, "again", compile, wrapper_path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(Occurrences(again.output, "kcache: hit " + tmp_ / "src/k.cu"), 1) << again.output;
  EXPECT_TRUE(Contains(Symbols(tmp_ / "again/k.o"), "wrapped_kernel"));

  // CUDA_HOME names the real toolkit but PATH's first nvcc is the wrapper: one link cannot run
  // both, so PATH's nvcc is left out of the links (a note says so) and the wrapper runs.
  RunResult apart = RunUnderKcache(tmp_, "apart", compile,
                                   absl::StrCat("CUDA_HOME=/usr/local/cuda ", wrapper_path));
  ASSERT_EQ(apart.exit_code, 0) << apart.output;
  EXPECT_TRUE(Contains(apart.output, "is left as it is")) << apart.output;
  EXPECT_FALSE(Contains(apart.output, "kcache: miss " + tmp_ / "src/k.cu")) << apart.output;
  EXPECT_FALSE(Contains(apart.output, "kcache: hit " + tmp_ / "src/k.cu")) << apart.output;
  EXPECT_TRUE(Contains(Symbols(tmp_ / "apart/k.o"), "wrapped_kernel"));
}

TEST_F(RunEnvironmentTest, ACompilerTheEnvironmentNamesThatNoLinkRunsIsKept) {
  std::string mine = tmp_.Write("bin/my-cc", "#!/bin/sh\nexec gcc \"$@\"\n");
  fs::permissions(mine, fs::perms::owner_all);
  RunResult kept = Env(absl::StrCat("CC=", mine));
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_FALSE(Variables(kept.output).count("CC")) << kept.output;
  EXPECT_TRUE(Contains(kept.output, absl::StrCat("$CC (", mine, ") is kept"))) << kept.output;
  // The compiler PATH's gcc is: the link replaces it.
  RunResult same = Env("CC=gcc");
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_EQ(fs::canonical(Variables(same.output)["CC"]), fs::canonical(testing::KcacheLaunch()));
  // Another launcher (ccache) is kept, and the compiler after it is a link.
  RunResult other = Env("CMAKE_CUDA_COMPILER_LAUNCHER=ccache CUDA_HOME=/usr/local/cuda");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  std::map<std::string, std::string> vars = Variables(other.output);
  EXPECT_FALSE(vars.count("CMAKE_CUDA_COMPILER_LAUNCHER")) << other.output;
  EXPECT_EQ(vars["CUDACXX"], vars["CUDA_HOME"] + "/bin/nvcc") << other.output;
}

TEST_F(RunEnvironmentTest, NestedRunKeepsTheRealToolkitAndOneShimsDirectory) {
  std::string root = MakeToolkit();
  std::string inner =
      absl::StrCat(testing::KcacheCli(), " env --store ", tmp_ / "store", " --shims ",
                   tmp_ / "shims", " | grep -E '^(PATH|KCACHE_REAL_CUDA_HOME|CUDA_HOME)='\n");
  RunResult nested =
      RunUnderKcache(tmp_, "nested", inner, absl::StrCat("CUDA_HOME=", root, " ", kNvccInPath));
  ASSERT_EQ(nested.exit_code, 0) << nested.output;
  std::map<std::string, std::string> vars = Variables(nested.output);
  EXPECT_EQ(vars["KCACHE_REAL_CUDA_HOME"], root);
  EXPECT_EQ(fs::path(vars["CUDA_HOME"]).parent_path(), tmp_ / "shims");
  EXPECT_EQ(Occurrences(vars["PATH"], tmp_ / "shims"), 1) << vars["PATH"];
  // A CUDA_HOME that is a shim root, without the real root beside it, is refused.
  RunResult lost = Env(absl::StrCat("CUDA_HOME=", vars["CUDA_HOME"]));
  EXPECT_NE(lost.exit_code, 0);
  EXPECT_TRUE(Contains(lost.output, "KCACHE_REAL_CUDA_HOME is not set")) << lost.output;
}

TEST_F(RunEnvironmentTest, DriverStandInIsPreloadedAfterNvrtcsOnlyWithADriver) {
  std::string cuda_stand_in = fs::path(testing::KcacheCli()).parent_path() / "cuda/libcuda.so.1";
  if (!fs::exists(cuda_stand_in)) GTEST_SKIP() << "no driver stand-in at " << cuda_stand_in;
  std::string nvrtc_stand_in =
      fs::path(cuda_stand_in).parent_path().parent_path() / "nvrtc/libnvrtc.so.13";
  // A driver the loader finds (this machine has none): the toolkit's stub as libcuda.so.1 in a
  // directory of LD_LIBRARY_PATH.
  std::string driver = tmp_ / "driver/libcuda.so.1";
  fs::create_directories(fs::path(driver).parent_path());
  fs::copy_file("/usr/local/cuda/lib64/stubs/libcuda.so", driver);
  const std::string loads = absl::StrCat("LD_LIBRARY_PATH=", tmp_ / "driver", " ");
  RunResult with = Env(absl::StrCat(loads, "KCACHE_REAL_LIBCUDA=", driver));
  ASSERT_EQ(with.exit_code, 0) << with.output;
  std::map<std::string, std::string> vars = Variables(with.output);
  EXPECT_EQ(vars["LD_PRELOAD"], absl::StrCat(nvrtc_stand_in, ":", cuda_stand_in));
  EXPECT_EQ(vars["KCACHE_REAL_LIBCUDA"], driver);
  EXPECT_EQ(Occurrences(with.output, "LD_PRELOAD="), 1) << with.output;

  // --no-cuda: not preloaded, and taken out of an LD_PRELOAD that has it (a nested run).
  RunResult without = Env(absl::StrCat(loads, "KCACHE_REAL_LIBCUDA=", driver,
                                       " LD_PRELOAD=", nvrtc_stand_in, ":", cuda_stand_in),
                          "--no-cuda");
  ASSERT_EQ(without.exit_code, 0) << without.output;
  vars = Variables(without.output);
  EXPECT_EQ(vars["LD_PRELOAD"], nvrtc_stand_in);
  EXPECT_EQ(vars.count("KCACHE_REAL_LIBCUDA"), 0u) << without.output;
  // A driver that exports an API function no toolkit's stub has (one newer than the toolkit
  // kcache was built with): the stand-in would lose it, so it is not preloaded, and a note
  // names the function.
  std::string newer = tmp_ / "newer/libcuda.so.1";
  fs::create_directories(fs::path(newer).parent_path());
  std::string source = tmp_.Write("newer/fake.c",
                                  "int cuInit(unsigned f) { return 0; }\n"
                                  "int cuKcacheNoToolkitHasThis(void) { return 0; }\n");
  ASSERT_EQ(testing::Run(absl::StrCat("cc -shared -fPIC -o ", newer, " ", source)).exit_code, 0);
  RunResult refused = Env(absl::StrCat("LD_LIBRARY_PATH=", tmp_ / "newer"));
  ASSERT_EQ(refused.exit_code, 0) << refused.output;
  vars = Variables(refused.output);
  EXPECT_EQ(vars["LD_PRELOAD"], nvrtc_stand_in) << refused.output;
  EXPECT_EQ(vars.count("KCACHE_REAL_LIBCUDA"), 0u) << refused.output;
  EXPECT_TRUE(Contains(refused.output,
                       absl::StrCat("the CUDA driver ", newer,
                                    " exports 1 functions kcache's driver stand-in does not "
                                    "(cuKcacheNoToolkitHasThis)")))
      << refused.output;

  // KCACHE_CUDA_STANDIN=0 in the environment: the same, with a note.
  RunResult switched =
      Env(absl::StrCat(loads, "KCACHE_REAL_LIBCUDA=", driver,
                       " KCACHE_CUDA_STANDIN=0 LD_PRELOAD=", nvrtc_stand_in, ":", cuda_stand_in));
  ASSERT_EQ(switched.exit_code, 0) << switched.output;
  vars = Variables(switched.output);
  EXPECT_EQ(vars["LD_PRELOAD"], nvrtc_stand_in);
  EXPECT_EQ(vars.count("KCACHE_REAL_LIBCUDA"), 0u) << switched.output;
  EXPECT_TRUE(Contains(switched.output, "KCACHE_CUDA_STANDIN=0: kcache's CUDA driver stand-in"))
      << switched.output;

  // KCACHE_REAL_LIBCUDA naming the stand-in itself is not kept.
  RunResult self = Env(absl::StrCat(loads, "KCACHE_REAL_LIBCUDA=", cuda_stand_in));
  EXPECT_TRUE(Contains(self.output, "$KCACHE_REAL_LIBCUDA (" + cuda_stand_in + ") is not kept"))
      << self.output;

  // No driver on the node (an image's build): nothing of the driver's, and nothing said; and
  // KCACHE_REAL_LIBCUDA naming one the loader does not find (the toolkit's stub) preloads
  // nothing either: dlopen("libcuda.so.1") fails without kcache, and so it must with it.
  if (FindCudaDriver().empty()) {
    RunResult none = Env("");
    ASSERT_EQ(none.exit_code, 0) << none.output;
    vars = Variables(none.output);
    EXPECT_EQ(vars["LD_PRELOAD"], nvrtc_stand_in);
    EXPECT_EQ(vars.count("KCACHE_REAL_LIBCUDA"), 0u);
    EXPECT_FALSE(Contains(none.output, "driver")) << none.output;
    RunResult stub = Env("KCACHE_REAL_LIBCUDA=/usr/local/cuda/lib64/stubs/libcuda.so");
    ASSERT_EQ(stub.exit_code, 0) << stub.output;
    vars = Variables(stub.output);
    EXPECT_EQ(vars["LD_PRELOAD"], nvrtc_stand_in);
    EXPECT_EQ(vars.count("KCACHE_REAL_LIBCUDA"), 0u);
    EXPECT_TRUE(Contains(stub.output, "is not used: nothing loads here without kcache"))
        << stub.output;
  }

  // --check names the chain (a sanitizer build has no cache half: forwarded only there), and,
  // the kcached named not answering, that nothing is cached through it: exit 1.
  bool cache_half = fs::exists(fs::path(cuda_stand_in).parent_path() / "libkcache-cuda.so");
  std::string server = absl::StrCat("unix://", tmp_ / "kcache.sock");
  RunResult check = testing::Run(
      absl::StrCat("env ", testing::UnsetRoutedVariables(), "KCACHE_STATE_DIR=", tmp_ / "state",
                   " ", loads, "KCACHE_REAL_LIBCUDA=", driver, " ", testing::KcacheCli(),
                   " run --check --server ", server, " --shims ", tmp_ / "shims", " -- true"));
  EXPECT_EQ(check.exit_code, 1) << check.output;
  std::string silent = absl::StrCat("kcached at ", server, " does not answer: ");
  EXPECT_TRUE(
      Contains(check.output,
               absl::StrCat("module loads in the process (libraries' PTX the driver would JIT): ",
                            cuda_stand_in, " -> ", driver,
                            cache_half ? absl::StrCat(", forwarded only (", silent)
                                       : std::string(", forwarded only (no libkcache-cuda.so "
                                                     "beside the stand-in)"))))
      << check.output;
  EXPECT_TRUE(Contains(check.output, absl::StrCat("kcached: ", silent))) << check.output;
  EXPECT_FALSE(Contains(check.output, ", cached\n")) << check.output;
}

TEST_F(RunEnvironmentTest, CheckSaysWhatEachWayReachesAndRunsNothing) {
  RunResult check =
      testing::Run(absl::StrCat("cd ", tmp_.path(), " && env ", testing::UnsetRoutedVariables(),
                                "KCACHE_STATE_DIR=", tmp_ / "state", " CUDA_HOME=/usr/local/cuda ",
                                kNvccInPath, " ", testing::KcacheCli(), " run --check --store ",
                                tmp_ / "store", " --shims ", tmp_ / "shims", " -- touch ran"));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_FALSE(fs::exists(tmp_ / "ran"));
  std::string shims = tmp_ / "shims";
  for (const std::string& line : {
           absl::StrCat("nvcc via PATH: ", shims,
                        "/nvcc -> kcache-launch -> /usr/local/cuda/bin/nvcc"),
           absl::StrCat("nvcc via $PYTORCH_NVCC (torch.utils.cpp_extension): ", shims,
                        "/nvcc -> kcache-launch -> /usr/local/cuda/bin/nvcc"),
           std::string("/bin/nvcc -> kcache-launch -> /usr/local/cuda/bin/nvcc"),
           std::string(" /usr/local/cuda/bin/nvcc -> /usr/local/cuda/bin/nvcc"),
           std::string("NVRTC in the process (CuPy, cuda.core, DeepGEMM's NVRTC mode, torch): "),
           std::string("/libnvrtc.so.13 -> the libnvrtc.so.13 each process would load without "
                       "kcache ("),
       }) {
    EXPECT_TRUE(Contains(check.output, line)) << line << "\n" << check.output;
  }
  EXPECT_FALSE(Contains(check.output, "not through kcache")) << check.output;
  // A C compiler the environment names and no link runs: --check says so, and exits 1.
  std::string mine = tmp_.Write("bin/my-cc", "#!/bin/sh\nexec gcc \"$@\"\n");
  fs::permissions(mine, fs::perms::owner_all);
  RunResult bypassed = testing::Run(absl::StrCat(
      "env ", testing::UnsetRoutedVariables(), "KCACHE_STATE_DIR=", tmp_ / "state", " CC=", mine,
      " ", testing::KcacheCli(), " run --check --store ", tmp_ / "store", " --shims ", shims));
  EXPECT_EQ(bypassed.exit_code, 1) << bypassed.output;
  EXPECT_TRUE(Contains(bypassed.output, absl::StrCat("cc via $CC (setuptools, Makefiles; nvcc "
                                                     "-ccbin in FlashInfer): ",
                                                     mine, " (not through kcache)")))
      << bypassed.output;
}

}  // namespace
}  // namespace kcache
