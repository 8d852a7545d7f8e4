// The load check (core/load_check.h) for every serving rule, without a GPU: a GPU's SM and
// driver and an artifact in, OK or the message out; and the entry points a loader looks up
// (core/entry_points.h), from real NVRTC output.
#include "core/load_check.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/cubin.h"
#include "core/entry_points.h"
#include "engine/compile/compiler.h"
#include "engine/resolve/decide.h"
#include "gtest/gtest.h"
#include "tests/testutil/toolkit.h"

namespace kcache {
namespace {

using Names = std::vector<std::string>;

bool Contains(absl::string_view text, absl::string_view part) {
  return absl::StrContains(text, part);
}

LoadingGpu Gpu(const std::string& sm, uint32_t driver = 13000, const std::string& name = "") {
  absl::StatusOr<Sm> parsed = ParseSm(sm);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return LoadingGpu{.ordinal = 0, .name = name, .sm = *parsed, .driver = driver};
}

LoadingArtifact Art(const std::string& target, uint32_t min_driver = 13000) {
  bool ptx = target.rfind("compute_", 0) == 0;
  return LoadingArtifact{.kernel_name = "softmax",
                         .kind = ptx ? ArtifactKind::kPtx : ArtifactKind::kCubin,
                         .target = target,
                         .min_driver = min_driver};
}

TEST(LoadCheckTest, ExactSassRunsIncludingArchAndFamilyVariants) {
  EXPECT_TRUE(CheckArtifactForGpu(Art("sm_89"), Gpu("8.9")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("sm_90a"), Gpu("9.0")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("sm_100f"), Gpu("10.0")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("sm_75"), Gpu("7.5")).ok());
}

TEST(LoadCheckTest, CompatibleSassRunsOnALaterMinorOfTheSameMajor) {
  EXPECT_TRUE(CheckArtifactForGpu(Art("sm_80"), Gpu("8.6")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("sm_86"), Gpu("8.9")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("sm_100f"), Gpu("10.3")).ok());
}

TEST(LoadCheckTest, SassForAnotherGpuIsRefusedNamingTheGpuAndWhatToResolve) {
  absl::Status s = CheckArtifactForGpu(Art("sm_89"), Gpu("9.0", 13000, "NVIDIA H100"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_PRED2(Contains, s.message(),
               ("softmax is sm_89 SASS; GPU 0 is NVIDIA H100 (sm_90): "
                "resolve it for 9.0 (sm_89 SASS runs only on 8.9 and later "
                "8.x GPUs)"));
}

TEST(LoadCheckTest, SassOfAHigherMinorAnotherMajorOrAnArchVariantElsewhereIsRefused) {
  struct Case {
    const char* target;
    const char* gpu;
    const char* why;
  };
  for (const Case& c : std::vector<Case>{
           {"sm_86", "8.0", "sm_86 SASS runs only on 8.6 and later 8.x GPUs"},
           {"sm_75", "8.6", "sm_75 SASS runs only on 7.5 and later 7.x GPUs"},
           {"sm_86", "7.5", "sm_86 SASS runs only on 8.6 and later 8.x GPUs"},
           {"sm_90", "10.0", "sm_90 SASS runs only on 9.0 and later 9.x GPUs"},
           {"sm_90a", "10.0", "sm_90a SASS runs only on 9.0 GPUs"},
           {"sm_100a", "10.3", "sm_100a SASS runs only on 10.0 GPUs"},
           {"sm_100f", "12.0", "sm_100f SASS runs only on 10.0 and later 10.x GPUs"},
       }) {
    absl::Status s = CheckArtifactForGpu(Art(c.target), Gpu(c.gpu));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << c.target << " on " << c.gpu;
    EXPECT_PRED2(
        Contains, s.message(),
        (absl::StrCat("softmax is ", c.target, " SASS; GPU 0 is sm_", ParseSm(c.gpu)->arch(),
                      ": resolve it for ", c.gpu, " (", c.why, ")")));
  }
}

TEST(LoadCheckTest, PtxRunsAtOrAboveItsArchWithinItsVariant) {
  EXPECT_TRUE(CheckArtifactForGpu(Art("compute_80"), Gpu("9.0")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("compute_75"), Gpu("12.0")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("compute_90a"), Gpu("9.0")).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("compute_100f"), Gpu("10.3")).ok());
}

TEST(LoadCheckTest, PtxAboveTheGpuOrOfAVariantForAnotherGpuIsRefused) {
  struct Case {
    const char* target;
    const char* gpu;
    const char* why;
  };
  for (const Case& c : std::vector<Case>{
           {"compute_90", "8.9", "compute_90 PTX is JIT-compiled only for 9.0 and later GPUs"},
           {"compute_90a", "10.0", "compute_90a PTX runs only on 9.0 GPUs"},
           {"compute_100f", "12.0", "compute_100f PTX runs only on 10.0 and later 10.x GPUs"},
       }) {
    absl::Status s = CheckArtifactForGpu(Art(c.target), Gpu(c.gpu));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << c.target << " on " << c.gpu;
    EXPECT_PRED2(Contains, s.message(), (absl::StrCat("softmax is ", c.target, " PTX; ")));
    EXPECT_TRUE(absl::StrContains(s.message(), c.why)) << s;
  }
}

TEST(LoadCheckTest, ADriverOlderThanTheArtifactNeedsIsRefusedAndAnUnknownOneIsNot) {
  absl::Status ptx = CheckArtifactForGpu(Art("compute_90", 13010), Gpu("9.0", 13000, "H100"));
  EXPECT_EQ(ptx.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_PRED2(Contains, ptx.message(),
               ("softmax is compute_90 PTX that needs driver 13.1 or newer; GPU 0 is "
                "H100 (sm_90) with driver 13.0: update the driver, or resolve it for "
                "9.0 with driver 13000"));
  absl::Status cubin = CheckArtifactForGpu(Art("sm_90", 13000), Gpu("9.0", 12080));
  EXPECT_EQ(cubin.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(cubin.message(), "sm_90 SASS that needs driver 13.0 or newer"))
      << cubin;
  EXPECT_TRUE(CheckArtifactForGpu(Art("compute_90", 13010), Gpu("9.0", 13010)).ok());
  EXPECT_TRUE(CheckArtifactForGpu(Art("compute_90", 13010), Gpu("9.0", 0)).ok());
}

TEST(LoadCheckTest, LtoirADamagedKindOrTargetIsInvalidArgument) {
  LoadingArtifact ltoir = Art("compute_90");
  ltoir.kind = ArtifactKind::kLtoir;
  absl::Status s = CheckArtifactForGpu(ltoir, Gpu("9.0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "softmax is LTO-IR, which the driver cannot load"))
      << s;
  LoadingArtifact mismatched = Art("compute_90");
  mismatched.kind = ArtifactKind::kCubin;
  EXPECT_EQ(CheckArtifactForGpu(mismatched, Gpu("9.0")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckArtifactForGpu(Art("sm_x9"), Gpu("9.0")).code(),
            absl::StatusCode::kInvalidArgument);
  LoadingArtifact unnamed = Art("sm_89");
  unnamed.kernel_name = "";
  EXPECT_TRUE(absl::StrContains(CheckArtifactForGpu(unnamed, Gpu("9.0")).message(),
                                "the kernel is sm_89 SASS"))
      << CheckArtifactForGpu(unnamed, Gpu("9.0"));
}

// The check and the serving decision are one rule: for every target and GPU, an artifact is
// ranked for a device (RankCandidates) exactly when the load check accepts it there.
TEST(LoadCheckTest, AgreesWithTheServingDecisionForEveryTargetAndGpu) {
  const std::vector<std::string> targets = {
      "sm_75",      "sm_80",      "sm_86",       "sm_89",       "sm_90",        "sm_90a",
      "sm_100",     "sm_100a",    "sm_100f",     "sm_103",      "sm_120",       "compute_75",
      "compute_86", "compute_90", "compute_90a", "compute_100", "compute_100f", "compute_120"};
  const std::vector<std::string> gpus = {"7.5",  "8.0",  "8.6",  "8.9", "9.0",
                                         "10.0", "10.3", "12.0", "12.1"};
  for (uint32_t min_driver : {12080u, 13000u, 13010u}) {
    for (const std::string& t : targets) {
      ArtifactMeta meta;
      meta.key.target = *ParseTarget(t);
      meta.key.kind =
          meta.key.target.kind == TargetKind::kSass ? ArtifactKind::kCubin : ArtifactKind::kPtx;
      meta.min_driver = min_driver;
      for (const std::string& g : gpus) {
        Device device{.sm = *ParseSm(g), .driver = 13000};
        bool ranked = !RankCandidates({meta}, device).empty();
        bool loads = CheckArtifactForGpu(Art(t, min_driver), Gpu(g, 13000)).ok();
        EXPECT_EQ(ranked, loads) << t << " (driver " << min_driver << ") on " << g;
      }
    }
  }
}

TEST(EntryPointsTest, PtxEntriesSkipFunctionsAndComments) {
  const char* ptx =
      "// .entry commented_out(\n"
      ".func (.param .b32 r) _Z6helperf(\n"
      "/* .visible .entry also_commented( */\n"
      ".visible .entry scale(\n"
      "  .param .u64 p)\n"
      ".weak .entry _Z4axpyIfEvPT_PKS0_S0_ (\n";
  EXPECT_EQ(PtxEntryNames(ptx), (Names{"scale", "_Z4axpyIfEvPT_PKS0_S0_"}));
  EXPECT_TRUE(PtxEntryNames("").empty());
}

TEST(EntryPointsTest, RealCubinAndPtxListTheExternCAndLoweredKernelsOnly) {
  const auto& toolkit = testing::SharedToolkit();
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();
  CompileJob job;
  job.spec.name = "entries";
  job.spec.source =
      "__device__ __noinline__ float helper(float x) { return x * 2.0f; }\n"
      "extern \"C\" __global__ void scale(float* p) { p[threadIdx.x] = helper(p[threadIdx.x]); }\n"
      "template <typename T> __global__ void axpy(T* y, T a) { y[threadIdx.x] *= a; }\n";
  job.spec.name_expressions = {"axpy<float>"};
  job.id = ComputeKernelId(job.spec);
  job.target = *ParseTarget("sm_89");
  absl::StatusOr<CompileOutput> out = NewNvrtcCompiler(*toolkit)->Compile(job);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const Artifact& a : out->artifacts) {
    ASSERT_FALSE(a.meta.lowered_names.empty());
    const std::string& lowered = a.meta.lowered_names.front().second;
    absl::StatusOr<std::vector<std::string>> entries = EntryPointsOf(a.meta.key.kind, a.bytes);
    ASSERT_TRUE(entries.ok()) << entries.status();
    std::sort(entries->begin(), entries->end());
    Names want = {"scale", lowered};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(*entries, want) << ArtifactKindName(a.meta.key.kind);
  }
  EXPECT_EQ(EntryPointsOf(ArtifactKind::kCubin, "not an elf").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EntryPointsOf(ArtifactKind::kLtoir, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A cubin whose symbol table points past the file is refused, never read past.
TEST(EntryPointsTest, ATruncatedCubinIsRefused) {
  const auto& toolkit = testing::SharedToolkit();
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();
  CompileJob job;
  job.spec.name = "tiny";
  job.spec.source = "extern \"C\" __global__ void tiny(int* p) { *p = 1; }\n";
  job.id = ComputeKernelId(job.spec);
  job.target = *ParseTarget("sm_75");
  absl::StatusOr<CompileOutput> out = NewNvrtcCompiler(*toolkit)->Compile(job);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const Artifact& a : out->artifacts) {
    if (a.meta.key.kind != ArtifactKind::kCubin) continue;
    EXPECT_EQ(*CubinEntryNames(a.bytes), Names{"tiny"});
    for (size_t keep : {size_t{64}, a.bytes.size() / 2}) {
      absl::StatusOr<std::vector<std::string>> cut = CubinEntryNames(a.bytes.substr(0, keep));
      EXPECT_FALSE(cut.ok()) << keep << " bytes";
    }
  }
}

}  // namespace
}  // namespace kcache
