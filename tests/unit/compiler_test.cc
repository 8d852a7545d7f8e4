// Real NVRTC and nvJitLink compiles of two tiny kernels (tests/testdata). Each compile takes
// ~60 ms, so the set is kept small.
#include "engine/compile/compiler.h"

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/cubin.h"
#include "engine/compile/toolkit.h"
#include "gtest/gtest.h"
#include "tests/testutil/toolkit.h"
#include "tests/testutil/tree_paths.h"

extern char** environ;

namespace kcache {
namespace {

namespace fs = std::filesystem;

constexpr char kChildOutputEnv[] = "KCACHE_COMPILER_TEST_CHILD_OUT";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string TestData(const std::string& name) {
  return ReadFile(fs::path(testing::SourcePath("")) / "tests" / "testdata" / name);
}

Target T(const std::string& text) {
  absl::StatusOr<Target> target = ParseTarget(text);
  EXPECT_TRUE(target.ok()) << target.status();
  return *target;
}

CompileJob Job(KernelSpec spec, const std::string& target) {
  CompileJob job;
  job.spec = std::move(spec);
  job.id = ComputeKernelId(job.spec);
  job.target = T(target);
  return job;
}

KernelSpec Saxpy() {
  KernelSpec spec;
  spec.name = "saxpy";
  spec.source = TestData("saxpy.cu");
  return spec;
}

// A templated kernel in an anonymous namespace, with a header sent by name.
KernelSpec ScaleTemplated() {
  KernelSpec spec;
  spec.name = "scale";
  spec.source = TestData("scale_templated.cu");
  spec.headers["scale_op.h"] = TestData("scale_op.h");
  spec.options = {"-std=c++17", "-DKCACHE_TEST=1"};
  spec.name_expressions = {"scale<float>", "scale<double>"};
  return spec;
}

const Artifact* Find(const CompileOutput& out, ArtifactKind kind) {
  for (const Artifact& a : out.artifacts) {
    if (a.meta.key.kind == kind) return &a;
  }
  return nullptr;
}

class CompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::shared_ptr<const Toolkit>>& toolkit =
        ::kcache::testing::SharedToolkit();
    ASSERT_TRUE(toolkit.ok()) << toolkit.status();
    toolkit_ = *toolkit;
    compiler_ = NewNvrtcCompiler(toolkit_);
  }
  const Toolkit& toolkit() const { return *toolkit_; }

  std::shared_ptr<const Toolkit> toolkit_;
  std::unique_ptr<Compiler> compiler_;
};

TEST_F(CompilerTest, SmTargetsGiveCubinWithThatSmAndMatchingPtx) {
  for (int arch : {75, 86, 89, 90}) {
    CompileJob job = Job(Saxpy(), absl::StrCat("sm_", arch));
    absl::StatusOr<CompileOutput> out = compiler_->Compile(job);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->artifacts.size(), 2u) << arch;
    const Artifact* cubin = Find(*out, ArtifactKind::kCubin);
    const Artifact* ptx = Find(*out, ArtifactKind::kPtx);
    ASSERT_NE(cubin, nullptr);
    ASSERT_NE(ptx, nullptr);

    absl::StatusOr<int> sm = CubinSmArch(cubin->bytes);
    ASSERT_TRUE(sm.ok()) << sm.status();
    EXPECT_EQ(*sm, arch);
    EXPECT_EQ(cubin->meta.key.target.ToString(), absl::StrCat("sm_", arch));
    EXPECT_EQ(ptx->meta.key.target.ToString(), absl::StrCat("compute_", arch));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(ptx->bytes, m, std::regex(R"(\n\.target (sm_[0-9]+))")));
    EXPECT_EQ(m[1], absl::StrCat("sm_", arch));
    EXPECT_NE(ptx->bytes.find(".entry saxpy("), std::string::npos);
    EXPECT_NE(ptx->bytes.back(), '\0');

    for (const Artifact* a : {cubin, ptx}) {
      EXPECT_EQ(a->meta.key.kernel_id, job.id);
      EXPECT_EQ(a->meta.key.toolkit, toolkit().identity().id);
      EXPECT_EQ(a->meta.key.driver, 0u);
      EXPECT_EQ(a->meta.kernel_name, "saxpy");
      EXPECT_EQ(a->meta.size, a->bytes.size());
      EXPECT_EQ(a->meta.checksum, PayloadChecksum(a->bytes));
      EXPECT_EQ(a->meta.min_driver, 13000u);
      EXPECT_GT(a->meta.compile_micros, 0u);
      EXPECT_GT(a->meta.created_unix_ms, 1700000000000);
    }
  }
}

TEST_F(CompilerTest, ComputeTargetGivesOnlyPtxEqualToThePtxOfTheSmCompile) {
  absl::StatusOr<CompileOutput> ptx_only = compiler_->Compile(Job(Saxpy(), "compute_86"));
  ASSERT_TRUE(ptx_only.ok()) << ptx_only.status();
  ASSERT_EQ(ptx_only->artifacts.size(), 1u);
  const Artifact& ptx = ptx_only->artifacts[0];
  EXPECT_EQ(ptx.meta.key.kind, ArtifactKind::kPtx);
  EXPECT_EQ(ptx.meta.key.target.ToString(), "compute_86");
  EXPECT_NE(ptx.bytes.find(".target sm_86"), std::string::npos);

  // One key, one content: the compute_86 PTX an sm_86 compile yields is byte-identical.
  absl::StatusOr<CompileOutput> with_sass = compiler_->Compile(Job(Saxpy(), "sm_86"));
  ASSERT_TRUE(with_sass.ok()) << with_sass.status();
  const Artifact* ptx_from_sass = Find(*with_sass, ArtifactKind::kPtx);
  ASSERT_NE(ptx_from_sass, nullptr);
  EXPECT_EQ(ptx_from_sass->meta.key, ptx.meta.key);
  EXPECT_EQ(ptx_from_sass->bytes, ptx.bytes);
}

TEST_F(CompilerTest, NameExpressionsAreLoweredAndNameTheKernelsInTheCubin) {
  absl::StatusOr<CompileOutput> out = compiler_->Compile(Job(ScaleTemplated(), "sm_80"));
  ASSERT_TRUE(out.ok()) << out.status();
  const Artifact* cubin = Find(*out, ArtifactKind::kCubin);
  const Artifact* ptx = Find(*out, ArtifactKind::kPtx);
  ASSERT_NE(cubin, nullptr);
  ASSERT_NE(ptx, nullptr);
  ASSERT_EQ(cubin->meta.lowered_names.size(), 2u);
  EXPECT_EQ(cubin->meta.lowered_names, ptx->meta.lowered_names);
  EXPECT_EQ(cubin->meta.lowered_names[0].first, "scale<float>");
  EXPECT_EQ(cubin->meta.lowered_names[1].first, "scale<double>");
  for (const auto& [expr, lowered] : cubin->meta.lowered_names) {
    EXPECT_EQ(lowered.rfind("_Z", 0), 0u) << expr << " -> " << lowered;
    EXPECT_NE(lowered.find("scale"), std::string::npos) << lowered;
    EXPECT_NE(cubin->bytes.find(lowered), std::string::npos) << lowered;
    EXPECT_NE(ptx->bytes.find(".entry " + lowered + "("), std::string::npos) << lowered;
  }
  EXPECT_NE(cubin->meta.lowered_names[0].second, cubin->meta.lowered_names[1].second);
}

TEST_F(CompilerTest, RandomSeedDependsOnKernelTargetAndToolkitButNotKind) {
  KernelId id = ComputeKernelId(ScaleTemplated());
  KernelId other = ComputeKernelId(Saxpy());
  std::string tk = toolkit().identity().id;
  std::string seed = RandomSeedFor(id, T("sm_89"), tk);
  EXPECT_TRUE(std::regex_match(seed, std::regex("0x[0-9a-f]{8}"))) << seed;
  EXPECT_EQ(seed, RandomSeedFor(id, T("sm_89"), tk));
  EXPECT_EQ(seed, RandomSeedFor(id, T("compute_89"), tk));  // same compile, same PTX
  EXPECT_NE(seed, RandomSeedFor(id, T("sm_90"), tk));
  EXPECT_NE(RandomSeedFor(id, T("sm_90"), tk), RandomSeedFor(id, T("sm_90a"), tk));
  EXPECT_NE(seed, RandomSeedFor(other, T("sm_89"), tk));
  EXPECT_NE(seed, RandomSeedFor(id, T("sm_89"), "nvrtc-13.0+000000000000"));
}

// The child's side of CompileInChildProcess, run before main (so it is no test of its own):
// when kChildOutputEnv is set, loads the toolkit itself, compiles, writes cubin + "\n--\n" +
// lowered names to that file, and exits (0, or 1 on any failure).
int RunAsCompileChild() {
  const char* out_path = getenv(kChildOutputEnv);
  if (out_path == nullptr) return 0;
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(Toolkit::DefaultRoot());
  if (!toolkit.ok()) std::exit(1);
  absl::StatusOr<CompileOutput> out =
      NewNvrtcCompiler(*toolkit)->Compile(Job(ScaleTemplated(), "sm_89"));
  if (!out.ok()) std::exit(1);
  const Artifact* cubin = Find(*out, ArtifactKind::kCubin);
  if (cubin == nullptr) std::exit(1);
  {
    std::ofstream file(out_path, std::ios::binary);
    file << cubin->bytes << "\n--\n";
    for (const auto& [expr, lowered] : cubin->meta.lowered_names) file << lowered << "\n";
    if (!file.good()) std::exit(1);
  }
  std::exit(0);
}
const int kCompileChild = RunAsCompileChild();

// Compiles the templated kernel for sm_89 in a fresh process (this test binary, re-run with
// kChildOutputEnv set: RunAsCompileChild) and returns cubin + "\n--\n" + lowered names.
std::string CompileInChildProcess(const fs::path& out_file) {
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string env_entry = absl::StrCat(kChildOutputEnv, "=", out_file.string());
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    // GTEST_OUTPUT and friends would make the child overwrite the parent's reports.
    if (std::string_view(*e).rfind("GTEST_", 0) != 0) env.push_back(*e);
  }
  env.push_back(env_entry.data());
  env.push_back(nullptr);
  char* argv[] = {self.data(), nullptr};
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, env.data()), 0);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  return ReadFile(out_file);
}

TEST_F(CompilerTest, SameJobGivesSameBytesInTwoProcesses) {
  fs::path dir = fs::temp_directory_path() / absl::StrCat("kcache-compiler-", getpid());
  fs::create_directories(dir);
  std::string first = CompileInChildProcess(dir / "first");
  std::string second = CompileInChildProcess(dir / "second");
  fs::remove_all(dir);
  ASSERT_GT(first.size(), 1000u);
  // Without -frandom-seed the anonymous namespace's mangled name, and so the cubin, differs
  // from process to process.
  EXPECT_TRUE(first == second) << "outputs of two processes differ; lowered names:\n"
                               << first.substr(first.find("\n--\n")) << "vs\n"
                               << second.substr(second.find("\n--\n"));
  // And the parent's own compile agrees too.
  absl::StatusOr<CompileOutput> out = compiler_->Compile(Job(ScaleTemplated(), "sm_89"));
  ASSERT_TRUE(out.ok()) << out.status();
  const Artifact* cubin = Find(*out, ArtifactKind::kCubin);
  ASSERT_NE(cubin, nullptr);
  EXPECT_TRUE(first.substr(0, first.find("\n--\n")) == cubin->bytes)
      << "the parent's cubin differs from the children's";
  // The seed shows in the anonymous namespace's mangled name.
  std::string seed =
      RandomSeedFor(ComputeKernelId(ScaleTemplated()), T("sm_89"), toolkit().identity().id);
  EXPECT_NE(cubin->meta.lowered_names[0].second.find(seed.substr(2)), std::string::npos)
      << cubin->meta.lowered_names[0].second << " lacks " << seed;
}

TEST_F(CompilerTest, ConcurrentCompilesAgreeWithEachOther) {
  // NVRTC allows concurrent compiles of distinct programs; each Compile owns its program.
  absl::StatusOr<CompileOutput> a, b;
  std::thread ta([&] { a = compiler_->Compile(Job(ScaleTemplated(), "sm_120")); });
  std::thread tb([&] { b = compiler_->Compile(Job(ScaleTemplated(), "sm_120")); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->artifacts.size(), b->artifacts.size());
  for (size_t i = 0; i < a->artifacts.size(); ++i) {
    EXPECT_TRUE(a->artifacts[i].bytes == b->artifacts[i].bytes) << "artifact " << i << " differs";
  }
  EXPECT_EQ(*CubinSmArch(Find(*a, ArtifactKind::kCubin)->bytes), 120);
}

TEST_F(CompilerTest, LtoirForCompute75LinksToANewerSm) {
  CompileJob job = Job(Saxpy(), "compute_75");
  job.want_ltoir = true;
  absl::StatusOr<CompileOutput> out = compiler_->Compile(job);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->artifacts.size(), 2u);  // PTX + LTO-IR, no cubin for a compute_ target
  EXPECT_EQ(Find(*out, ArtifactKind::kCubin), nullptr);
  const Artifact* ltoir = Find(*out, ArtifactKind::kLtoir);
  ASSERT_NE(ltoir, nullptr);
  EXPECT_EQ(ltoir->meta.key.target.ToString(), "compute_75");
  EXPECT_EQ(ltoir->meta.checksum, PayloadChecksum(ltoir->bytes));
  EXPECT_FALSE(CubinSmArch(ltoir->bytes).ok());  // LTO-IR is not a cubin

  std::string log;
  absl::StatusOr<std::string> linked = LinkLtoir(toolkit(), {ltoir->bytes}, T("sm_90"), &log);
  ASSERT_TRUE(linked.ok()) << linked.status();
  absl::StatusOr<int> sm = CubinSmArch(*linked);
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_EQ(*sm, 90);
  EXPECT_NE(linked->find("saxpy"), std::string::npos);
}

TEST_F(CompilerTest, LtoirForCompute90DoesNotLinkToAnOlderSm) {
  CompileJob job = Job(Saxpy(), "compute_90");
  job.want_ltoir = true;
  absl::StatusOr<CompileOutput> out = compiler_->Compile(job);
  ASSERT_TRUE(out.ok()) << out.status();
  const Artifact* ltoir = Find(*out, ArtifactKind::kLtoir);
  ASSERT_NE(ltoir, nullptr);
  std::string log;
  absl::StatusOr<std::string> linked = LinkLtoir(toolkit(), {ltoir->bytes}, T("sm_86"), &log);
  ASSERT_FALSE(linked.ok());
  EXPECT_EQ(linked.status().code(), absl::StatusCode::kAborted) << linked.status();
  EXPECT_FALSE(log.empty());
  EXPECT_EQ(CompileLogOf(linked.status()), log);
  EXPECT_NE(linked.status().message().find("sm_86"), absl::string_view::npos);
  // A PTX target is not something nvJitLink can produce a cubin for.
  EXPECT_EQ(LinkLtoir(toolkit(), {ltoir->bytes}, T("compute_90")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CompilerTest, SyntaxErrorIsAbortedWithTheNvrtcLog) {
  KernelSpec spec = Saxpy();
  spec.name = "broken";
  spec.source = "__global__ void broken(float* p) {\n  p[0] = 1.0f\n  int x = ;\n}\n";
  CompileJob job = Job(spec, "sm_86");
  absl::StatusOr<CompileOutput> out = compiler_->Compile(job);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kAborted);
  std::string message(out.status().message());
  std::string expected_start =
      absl::StrCat("compile of broken (", job.id.ShortHex(), ") for sm_86 failed:\n");
  EXPECT_EQ(message.rfind(expected_start, 0), 0u) << message;
  std::string log = CompileLogOf(out.status());
  EXPECT_NE(log.find("error"), std::string::npos) << log;
  // The log points at the line, under a program name derived from the kernel id.
  EXPECT_NE(log.find(absl::StrCat("kernel_", job.id.ShortHex(), ".cu(3)")), std::string::npos)
      << log;
  EXPECT_NE(message.find(log), std::string::npos);
}

TEST_F(CompilerTest, AnIncludeThatCannotOpenSaysTheSameWhetherThePathExistsOrNot) {
  // NVRTC adds a reason for a path that exists (": is a directory"; in the sandbox,
  // ": Permission denied") and none for a missing one: the logs must not tell them apart.
  auto log_of = [&](const std::string& path) {
    KernelSpec spec = Saxpy();
    spec.source = absl::StrCat("#include \"", path, "\"\n", spec.source);
    absl::StatusOr<CompileOutput> out = compiler_->Compile(Job(spec, "sm_86"));
    EXPECT_EQ(out.status().code(), absl::StatusCode::kAborted) << path;
    std::string log = CompileLogOf(out.status());
    size_t at = log.find(path);
    EXPECT_NE(at, std::string::npos) << log;
    // The line, from the path on, is the path and its closing quote alone.
    return at == std::string::npos ? log : log.substr(at, log.find('\n', at) - at);
  };
  std::string exists = fs::temp_directory_path().string();  // a directory: has a reason
  std::string missing = exists + "/kcache-no-such-header.h";
  EXPECT_EQ(log_of(exists), exists + "\"");
  EXPECT_EQ(log_of(missing), missing + "\"");
}

TEST_F(CompilerTest, DisallowedOptionsAreInvalidArgumentNamingTheOption) {
  for (const std::string option :
       {"-fdevice-time-trace=x", "--pch-dir=/tmp", "-arch=sm_80", "-I/etc"}) {
    KernelSpec spec = Saxpy();
    spec.options = {"-DOK=1", option};
    absl::StatusOr<CompileOutput> out = compiler_->Compile(Job(spec, "sm_86"));
    ASSERT_FALSE(out.ok()) << option;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_NE(out.status().message().find(option), absl::string_view::npos) << out.status();
  }
}

TEST_F(CompilerTest, EveryAllowlistedOptionIsAcceptedByNvrtc) {
  // One compile with every spelling the allowlist takes: none may be one NVRTC refuses.
  KernelSpec spec = Saxpy();
  spec.options = {"-std=c++14",
                  "--std=c++17",
                  "-DFOO",
                  "-DNAME=a b",
                  "--define-macro=BAR=2",
                  "-UFOO",
                  "--undefine-macro=BAR",
                  "--use_fast_math",
                  "-use_fast_math",
                  "--ftz=true",
                  "-ftz=false",
                  "--prec-div=false",
                  "-prec-div=true",
                  "--prec-sqrt=false",
                  "-prec-sqrt=true",
                  "--fmad=false",
                  "-fmad=true",
                  "-default-device",
                  "--device-as-default-execution-space",
                  "-rdc=true",
                  "--relocatable-device-code=false",
                  "--extra-device-vectorization",
                  "-extra-device-vectorization",
                  "-lineinfo",
                  "--generate-line-info",
                  "--dopt=on",
                  "-dopt=on",
                  "--restrict",
                  "-restrict",
                  "-w",
                  "--disable-warnings",
                  "--maxrregcount=64",
                  "-maxrregcount=255",
                  "-Xptxas=-v",
                  "--ptxas-options=-v"};
  absl::StatusOr<CompileOutput> out = compiler_->Compile(Job(spec, "sm_75"));
  ASSERT_TRUE(out.ok()) << out.status();
  const Artifact* cubin = Find(*out, ArtifactKind::kCubin);
  ASSERT_NE(cubin, nullptr);
  // -Xptxas=-v reports register use in the log, which travels with the artifact.
  EXPECT_NE(cubin->meta.compile_log.find("Used"), std::string::npos) << cubin->meta.compile_log;
}

TEST_F(CompilerTest, NulBytesInTheSpecAreInvalidArgument) {
  // NVRTC reads C strings: what follows a NUL would silently not be compiled.
  KernelSpec spec = Saxpy();
  spec.source += std::string("\0#error hidden\n", 16);
  EXPECT_EQ(compiler_->Compile(Job(spec, "sm_86")).status().code(),
            absl::StatusCode::kInvalidArgument);
  spec = ScaleTemplated();
  spec.headers["scale_op.h"].push_back('\0');
  absl::Status status = compiler_->Compile(Job(spec, "sm_86")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("scale_op.h"), absl::string_view::npos) << status;
}

TEST_F(CompilerTest, UnsupportedTargetIsInvalidArgumentListingSupportedArchs) {
  absl::StatusOr<CompileOutput> out = compiler_->Compile(Job(Saxpy(), "sm_70"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  std::string message(out.status().message());
  EXPECT_NE(message.find("sm_70"), std::string::npos) << message;
  EXPECT_NE(message.find("7.5"), std::string::npos) << message;
  EXPECT_NE(message.find("12.1"), std::string::npos) << message;
  EXPECT_NE(message.find(toolkit().identity().DisplayName()), std::string::npos) << message;
}

TEST_F(CompilerTest, ToolkitIncludesAndSpecHeadersAreBothVisible) {
  KernelSpec spec;
  spec.name = "half_scale";
  spec.source =
      "#include <cuda_fp16.h>\n#include \"scale_op.h\"\n"
      "extern \"C\" __global__ void half_scale(__half* p, float f) {\n"
      "  p[threadIdx.x] = __float2half(kcache_test::Apply(__half2float(p[threadIdx.x]), f));\n"
      "}\n";
  spec.headers["scale_op.h"] = TestData("scale_op.h");
  absl::StatusOr<CompileOutput> out = compiler_->Compile(Job(spec, "sm_75"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*CubinSmArch(Find(*out, ArtifactKind::kCubin)->bytes), 75);
}

}  // namespace
}  // namespace kcache
