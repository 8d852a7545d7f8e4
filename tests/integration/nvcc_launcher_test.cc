// `kcache nvcc` with the real nvcc (no GPU needed: nvcc compiles for any arch), over a store
// directory and through kcached over a baked store: each input of the key that must make a
// miss, and the ways a pod must hit what the image build recorded.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::LauncherEnv;
using testing::Outcome;
using testing::OutcomeOf;
using testing::ReadAll;
using testing::RunIn;

constexpr char kKernel[] = R"(#include "scale.cuh"
#ifdef __CUDA_ARCH__
#include "device_only.cuh"
#endif
__global__ void scale(float* x) {
#ifdef __CUDA_ARCH__
  x[threadIdx.x] *= SCALE * DEVICE_FACTOR;
#endif
}
#ifndef __CUDA_ARCH__
int host_answer() { return HOST_ANSWER; }
#endif
)";

class NvccLauncherTest : public testing::LauncherTest {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/local/cuda/bin/nvcc") && testing::Run("command -v nvcc").exit_code != 0) {
      GTEST_SKIP() << "no nvcc";
    }
    src_ = tmp_.Write("src/scale.cu", kKernel);
    tmp_.Write("src/scale.cuh", "#define SCALE 2.0f\n#define HOST_ANSWER 7\n");
    tmp_.Write("src/device_only.cuh", "#define DEVICE_FACTOR 1.0f\n");
  }

  // The shape of torch's nvcc rule: absolute paths, -MD -MF, -gencode, -Xcompiler -fPIC.
  std::string Compile(const std::string& gencode = "-gencode=arch=compute_89,code=sm_89",
                      const std::string& extra = "") const {
    return absl::StrCat(
        "$KCACHE nvcc --generate-dependencies-with-compile --dependency-output "
        "scale.o.d -I",
        tmp_ / "src", " -DUSE_X=1 ", gencode, " --compiler-options -fPIC ", extra, " -c ", src_,
        " -o scale.o");
  }

  // A kcached (no toolkit) over `baked`, and env_ pointed at it instead of the store.
  std::unique_ptr<testing::DaemonProcess> StartDaemon(LauncherEnv* env,
                                                      std::vector<std::string> baked = {}) {
    testing::DaemonOptions options;
    options.baked = std::move(baked);
    options.extra_flags = {"--no-toolkit"};
    auto daemon = std::make_unique<testing::DaemonProcess>(options);
    absl::Status started = daemon->Start();
    EXPECT_TRUE(started.ok()) << daemon->Log();
    *env = env_;
    env->store.clear();
    env->server = daemon->address();
    return daemon;
  }

  // `env` with the toolkit's bin/ first in PATH, so that a plain `nvcc` under `kcache run` is
  // the toolkit's, which kcache routes (PATH's nvcc being another program, a wrapper script as
  // some machines have in /usr/local/bin, is left as it is: docs/jit-libraries.md).
  static testing::LauncherEnv WithToolkitNvcc(testing::LauncherEnv env) {
    absl::StrAppend(&env.extra, " PATH=/usr/local/cuda/bin:$PATH");
    return env;
  }

  std::string src_;
};

TEST_F(NvccLauncherTest, AnotherBuildDirectoryHitsWithTheSameObject) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss) << last_output_;
  ASSERT_EQ(Build("elsewhere/b2", Compile()), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/scale.o", tmp_ / "elsewhere/b2/scale.o"));
  EXPECT_TRUE(testing::Contains(ReadAll(tmp_ / "elsewhere/b2/scale.o.d"), "device_only.cuh"));
}

TEST_F(NvccLauncherTest, EditedDeviceOnlyHeaderMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  tmp_.Write("src/device_only.cuh", "#define DEVICE_FACTOR 3.0f\n");
  EXPECT_EQ(Build("b2", Compile()), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(testing::SameFile(tmp_ / "b1/scale.o", tmp_ / "b2/scale.o"));
}

TEST_F(NvccLauncherTest, HostOnlyChangeMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  tmp_.Write("src/scale.cuh", "#define SCALE 2.0f\n#define HOST_ANSWER 8\n");
  EXPECT_EQ(Build("b2", Compile()), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(testing::SameFile(tmp_ / "b1/scale.o", tmp_ / "b2/scale.o"));
}

TEST_F(NvccLauncherTest, ChangedDefineMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  EXPECT_EQ(Build("b2", absl::StrReplaceAll(Compile(), {{"-DUSE_X=1", "-DUSE_X=2"}})),
            Outcome::kMiss)
      << last_output_;
}

TEST_F(NvccLauncherTest, ChangedArchListMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  EXPECT_EQ(Build("b2", Compile("-gencode=arch=compute_86,code=sm_86")), Outcome::kMiss)
      << last_output_;
  EXPECT_EQ(Build("b3", Compile("-gencode=arch=compute_89,code=sm_89 "
                                "-gencode=arch=compute_90,code=sm_90")),
            Outcome::kMiss)
      << last_output_;
}

// Options of a newer nvcc than the parser knows (FlashInfer's): learned from that nvcc's
// --help (memoized in the state directory by its digest) and keyed as written: a value
// changed misses; a header an option names is keyed through what the compile read.
TEST_F(NvccLauncherTest, OptionsLearnedFromNvccHelpAreKeyedAsWritten) {
  std::string flashinfer =
      "-static-global-template-stub=false --compress-mode=size --jobserver --threads=1";
  ASSERT_EQ(Build("b1", Compile("-gencode=arch=compute_89,code=sm_89", flashinfer)), Outcome::kMiss)
      << last_output_;
  EXPECT_FALSE(testing::Contains(last_output_, "uncached")) << last_output_;
  EXPECT_FALSE(testing::Contains(last_output_, "not stored")) << last_output_;
  bool memoized = false;
  for (const auto& entry : fs::directory_iterator(tmp_ / "state/compiler-options")) {
    memoized = memoized || absl::StartsWith(entry.path().filename().string(), "nvcc-");
  }
  EXPECT_TRUE(memoized);
  ASSERT_EQ(Build("b2", Compile("-gencode=arch=compute_89,code=sm_89", flashinfer)), Outcome::kHit)
      << last_output_;
  std::string changed = absl::StrReplaceAll(flashinfer, {{"stub=false", "stub=true"}});
  EXPECT_EQ(Build("b3", Compile("-gencode=arch=compute_89,code=sm_89", changed)), Outcome::kMiss)
      << last_output_;

  std::string pre = tmp_.Write("src/pre.h", "#define PRE_VALUE 1\n");
  std::string with_header = absl::StrCat(flashinfer, " -Xcompiler=-include,", pre);
  ASSERT_EQ(Build("b4", Compile("-gencode=arch=compute_89,code=sm_89", with_header)),
            Outcome::kMiss)
      << last_output_;
  ASSERT_EQ(Build("b5", Compile("-gencode=arch=compute_89,code=sm_89", with_header)), Outcome::kHit)
      << last_output_;
  tmp_.Write("src/pre.h", "#define PRE_VALUE 2\n");
  EXPECT_EQ(Build("b6", Compile("-gencode=arch=compute_89,code=sm_89", with_header)),
            Outcome::kMiss)
      << last_output_;
}

// DeepGEMM's JIT shape: nvcc SOURCE -o TMP -cubin, each kernel its own source under a cache
// directory, the output a fresh temporary name: a second pod (another output name) hits with
// the same cubin; a changed header its -I names misses.
TEST_F(NvccLauncherTest, DeviceCodeCompileHitsUnderAnotherOutputName) {
  auto compile = [&](const std::string& output) {
    return absl::StrCat("$KCACHE nvcc ", src_, " -o ", output,
                        " -std=c++17 --diag-suppress=39,161 -I", tmp_ / "src",
                        " --gpu-architecture=sm_89 --compiler-options=-fPIC,-O3 -cubin -O3 "
                        "--expt-relaxed-constexpr --expt-extended-lambda");
  };
  ASSERT_EQ(Build("b1", compile("tmp-1")), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(testing::Contains(last_output_, "uncached")) << last_output_;
  ASSERT_EQ(Build("b2", compile("tmp-2")), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/tmp-1", tmp_ / "b2/tmp-2"));
  EXPECT_EQ(ReadAll(tmp_ / "b2/tmp-2").substr(0, 4),
            "\x7f"
            "ELF");
  tmp_.Write("src/device_only.cuh", "#define DEVICE_FACTOR 5.0f\n");
  EXPECT_EQ(Build("b3", compile("tmp-3")), Outcome::kMiss) << last_output_;
  EXPECT_FALSE(testing::SameFile(tmp_ / "b1/tmp-1", tmp_ / "b3/tmp-3"));
}

TEST_F(NvccLauncherTest, AppendFlagsFromTheEnvironmentMiss) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  LauncherEnv env = env_;
  env.extra = "NVCC_APPEND_FLAGS=-DEXTRA=1";
  EXPECT_EQ(Build("b2", Compile(), &env), Outcome::kMiss) << last_output_;
}

TEST_F(NvccLauncherTest, HeaderShadowedThroughCpathMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  tmp_.Write("shadow/cuda_fp16.h", "#error shadowed\n");
  LauncherEnv env = env_;
  env.extra = absl::StrCat("CPATH=", tmp_ / "shadow");
  EXPECT_EQ(Build("b2", Compile(), &env), Outcome::kMiss) << last_output_;
}

TEST_F(NvccLauncherTest, AnotherHostCompilerMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  // A wrapper script standing in for gcc: another host compiler binary.
  std::string wrapper = tmp_.Write("tools/gcc", "#!/bin/sh\nexec /usr/bin/gcc \"$@\"\n");
  fs::permissions(wrapper, fs::perms::owner_all);
  EXPECT_EQ(
      Build("b2", Compile("-gencode=arch=compute_89,code=sm_89", absl::StrCat("-ccbin ", wrapper))),
      Outcome::kMiss)
      << last_output_;
  EXPECT_EQ(
      Build("b3", Compile("-gencode=arch=compute_89,code=sm_89", absl::StrCat("-ccbin ", wrapper))),
      Outcome::kHit)
      << last_output_;
}

TEST_F(NvccLauncherTest, AnotherNvccMisses) {
  ASSERT_EQ(Build("b1", Compile()), Outcome::kMiss);
  // A CUDA_HOME whose nvcc is a wrapper of the real one: the same tools, another nvcc.
  fs::path cuda = fs::canonical("/usr/local/cuda");
  fs::create_directories(tmp_ / "cuda/bin");
  for (const auto& entry : fs::directory_iterator(cuda)) {
    if (entry.path().filename() != "bin")
      fs::create_symlink(entry.path(), tmp_ / "cuda" / entry.path().filename());
  }
  for (const auto& entry : fs::directory_iterator(cuda / "bin")) {
    if (entry.path().filename() != "nvcc")
      fs::create_symlink(entry.path(), tmp_ / "cuda/bin" / entry.path().filename());
  }
  std::string nvcc = tmp_.Write(
      "cuda/bin/nvcc", absl::StrCat("#!/bin/sh\nexec ", (cuda / "bin/nvcc").string(), " \"$@\"\n"));
  fs::permissions(nvcc, fs::perms::owner_all);
  LauncherEnv env = env_;
  env.extra = absl::StrCat("CUDA_HOME=", tmp_ / "cuda");
  EXPECT_EQ(Build("b2", Compile(), &env), Outcome::kMiss) << last_output_;
}

TEST_F(NvccLauncherTest, PodsThroughKcachedOverOneBakedStoreHit) {
  ASSERT_EQ(Build("image", Compile()), Outcome::kMiss) << last_output_;
  for (int pod = 0; pod < 2; ++pod) {  // two pods: two kcached over the same baked store
    LauncherEnv env;
    std::unique_ptr<testing::DaemonProcess> daemon = StartDaemon(&env, {env_.store});
    std::string dir = absl::StrCat("pod", pod, "/ext");
    EXPECT_EQ(Build(dir, Compile(), &env), Outcome::kHit) << last_output_ << daemon->Log();
    EXPECT_TRUE(testing::SameFile(tmp_ / "image/scale.o", tmp_ / (dir + "/scale.o")));
  }
}

TEST_F(NvccLauncherTest, PodMissIsStoredInKcachedsWritableStoreAndServedBack) {
  LauncherEnv env;
  std::unique_ptr<testing::DaemonProcess> daemon = StartDaemon(&env);
  ASSERT_EQ(Build("a", Compile(), &env), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Build("b", Compile(), &env), Outcome::kHit) << last_output_ << daemon->Log();
  testing::RunResult explain = RunIn(
      tmp_ / "b", env,
      absl::StrCat("$KCACHE explain -- ",
                   absl::StrReplaceAll(Compile(), {{"$KCACHE ", ""}, {"-DUSE_X=1", "-DUSE_X=3"}})));
  EXPECT_TRUE(testing::Contains(explain.output, "miss: arg differs")) << explain.output;
  EXPECT_TRUE(testing::Contains(explain.output, "-DUSE_X=3")) << explain.output;
}

// An nvcc compile recorded under `kcache run` (nvcc reads PATH, whose shims come first there),
// explained from a shell that is not under it, says that this environment is not kcache run's
// and how to compare as the build ran; explained under `kcache run`, it is a hit.
TEST_F(NvccLauncherTest, ExplainOutsideKcacheRunSaysHowToCompareAsTheBuildRan) {
  std::string plain = absl::StrReplaceAll(Compile(), {{"$KCACHE ", ""}});
  std::string run =
      absl::StrCat("$KCACHE run --store ", env_.store, " --shims ", tmp_ / "shims", " -- ");
  testing::LauncherEnv env = WithToolkitNvcc(env_);
  ASSERT_EQ(Build("b1", run + plain, &env), Outcome::kMiss) << last_output_;
  testing::RunResult outside = RunIn(tmp_ / "b1", env, "$KCACHE explain -- " + plain);
  EXPECT_TRUE(testing::Contains(outside.output, "miss: ")) << outside.output;
  EXPECT_TRUE(testing::Contains(outside.output, "not the one `kcache run` gives"))
      << outside.output;
  testing::RunResult inside = RunIn(tmp_ / "b1", env, run + "$KCACHE explain -- " + plain);
  EXPECT_TRUE(testing::Contains(inside.output, "hit: entry")) << inside.output;
  EXPECT_FALSE(testing::Contains(inside.output, "kcache run` gives")) << inside.output;
}

// Under `kcache run` with its default shims directory (in the state directory), the paths of
// the shim toolkit are in the command (torch's -I$CUDA_HOME/include), in PATH and in what nvcc
// read: a build by one user serves another user's state directory and HOME, its dependency
// file naming that user's own shim toolkit; a build without KCACHE_SHIMS_DIR does not.
TEST_F(NvccLauncherTest, AnotherUsersStateDirectoryIsServedUnderKcacheRun) {
  std::string compile = absl::StrReplaceAll(
      Compile("-gencode=arch=compute_89,code=sm_89", "-include cuda_fp16.h -I\\$CUDA_HOME/include"),
      {{"$KCACHE ", ""}});
  std::string run = absl::StrCat("$KCACHE run --store ", env_.store, " -- sh -c \"", compile, "\"");
  testing::LauncherEnv image = WithToolkitNvcc(env_), pod = image, bare = image;
  image.state_dir = tmp_ / "image-state";
  absl::StrAppend(&image.extra, " HOME=", tmp_ / "root-home");
  pod.state_dir = tmp_ / "pod-state";
  absl::StrAppend(&pod.extra, " HOME=", tmp_ / "user-home");
  ASSERT_EQ(Build("image", run, &image), Outcome::kMiss) << last_output_;
  ASSERT_TRUE(testing::Contains(ReadAll(tmp_ / "image/scale.o.d"), "image-state/shims/cuda-"))
      << ReadAll(tmp_ / "image/scale.o.d");
  ASSERT_EQ(Build("pod", run, &pod), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "image/scale.o", tmp_ / "pod/scale.o"));
  std::string deps = ReadAll(tmp_ / "pod/scale.o.d");
  EXPECT_TRUE(testing::Contains(deps, "pod-state/shims/cuda-")) << deps;
  EXPECT_FALSE(testing::Contains(deps, "image-state")) << deps;
  // The same, with kcache run's variable taken away: the shims paths are then keyed as written.
  bare.state_dir = tmp_ / "bare-state";
  std::string unnamed = absl::StrCat("$KCACHE run --store ", env_.store,
                                     " -- env -u KCACHE_SHIMS_DIR sh -c \"", compile, "\"");
  EXPECT_EQ(Build("bare", unnamed, &bare), Outcome::kMiss) << last_output_;
}

}  // namespace
}  // namespace kcache
