// engine/fatbin/load_plan.h on hand-made fatbins and PTX: a driver load is served under the
// module id `kcache warm --library` stores its SASS under, only when the image lacks SASS for the
// GPU, and every JIT option either changes the id, leaves it, or leaves the load to the driver.
#include "engine/fatbin/load_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/ptx_sass.h"
#include "tests/testutil/fatbin_bytes.h"

namespace kcache::fatbin {
namespace {

using testing::FatbinBytes;
using testing::HandEntry;

const char kPtx[] = ".version 9.0\n.target sm_75\n.address_size 64\n\n// a kernel\n";
const char kCubin[] =
    "\x7f"
    "ELF a cubin's bytes";

// What warm stores the SASS of kPtx under (library_warm.cc: the entry's PTX and options, warm's
// compile options).
KernelId WarmsModule(const std::string& ptx = kPtx) {
  return PtxModuleId(ptx, "", PtxSassCompileOptions());
}

LoadPlan Plan(const std::string& image, Sm gpu, const std::vector<JitOption>& options = {}) {
  return PlanLoad(image, ImageKind::kFatbin, gpu, options);
}

TEST(LoadPlanTest, PtxOnlyFatbinIsServedUnderTheModuleIdWarmStores) {
  for (Compression c : {Compression::kNone, Compression::kLz4, Compression::kZstd}) {
    HandEntry ptx{.payload = kPtx, .compression = c};
    for (Sm gpu : {Sm{7, 5}, Sm{8, 6}, Sm{9, 0}, Sm{12, 0}}) {
      LoadPlan plan = Plan(FatbinBytes({ptx}), gpu);
      ASSERT_TRUE(plan.module.has_value()) << plan.why;
      EXPECT_EQ(*plan.module, WarmsModule());
      EXPECT_TRUE(absl::StrContains(plan.ptx, "compute_75")) << plan.ptx;
    }
  }
}

TEST(LoadPlanTest, ImageWithSassThatRunsOnTheGpuIsLeftToTheDriver) {
  std::string image = FatbinBytes({{.payload = kPtx}, {.kind = 2, .arch = 86, .payload = kCubin}});
  for (Sm gpu : {Sm{8, 6}, Sm{8, 9}}) {  // sm_86 runs on 8.6 and 8.9
    LoadPlan plan = Plan(image, gpu);
    EXPECT_FALSE(plan.module.has_value());
    EXPECT_TRUE(absl::StrContains(plan.why, "SASS sm_86")) << plan.why;
  }
  // Not across majors, nor below: there the PTX is what the driver would JIT.
  for (Sm gpu : {Sm{8, 0}, Sm{9, 0}}) {
    LoadPlan plan = Plan(image, gpu);
    ASSERT_TRUE(plan.module.has_value()) << gpu.ToString() << ": " << plan.why;
    EXPECT_EQ(*plan.module, WarmsModule());
  }
}

TEST(LoadPlanTest, PtxAboveTheGpuIsLeftToTheDriver) {
  std::string compute90 = ".version 9.0\n.target sm_90\n";
  LoadPlan plan = Plan(FatbinBytes({{.arch = 90, .payload = compute90}}), Sm{8, 6});
  EXPECT_FALSE(plan.module.has_value());
  EXPECT_TRUE(absl::StrContains(plan.why, "higher or another arch")) << plan.why;
}

TEST(LoadPlanTest, TheBestPtxForTheGpuIsTheOneServedFrom) {
  std::string compute80 = ".version 9.0\n.target sm_80\n";
  std::string image = FatbinBytes({{.payload = kPtx}, {.arch = 80, .payload = compute80}});
  EXPECT_EQ(*Plan(image, Sm{8, 6}).module, WarmsModule(compute80));
  EXPECT_EQ(*Plan(image, Sm{7, 5}).module, WarmsModule());
}

TEST(LoadPlanTest, ArchSpecificPtxIsServedOnlyOnItsOwnSm) {
  std::string compute90a = ".version 9.0\n.target sm_90a\n";
  std::string image =
      FatbinBytes({{.arch = 90, .flags = 0x11 | kFlagArchSpecific, .payload = compute90a}});
  EXPECT_TRUE(Plan(image, Sm{9, 0}).module.has_value());
  EXPECT_FALSE(Plan(image, Sm{10, 0}).module.has_value());
}

TEST(LoadPlanTest, PtxTextIsServedUnderTheIdOfTheSamePtxInAFatbin) {
  LoadPlan plan = PlanLoad(kPtx, ImageKind::kPtx, Sm{8, 6}, {});
  ASSERT_TRUE(plan.module.has_value()) << plan.why;
  EXPECT_EQ(*plan.module, WarmsModule());
}

TEST(LoadPlanTest, DamagedFatbinIsLeftToTheDriver) {
  std::string image = FatbinBytes({{.payload = kPtx}});
  image.resize(image.size() - 8);
  LoadPlan plan = Plan(image, Sm{8, 6});
  EXPECT_FALSE(plan.module.has_value());
  EXPECT_TRUE(absl::StrContains(plan.why, "does not read")) << plan.why;
}

TEST(LoadPlanTest, LogAndWallTimeOptionsDoNotChangeTheModuleId) {
  std::string image = FatbinBytes({{.payload = kPtx}});
  // CU_JIT_WALL_TIME, the four log buffers and sizes, LOG_VERBOSE, TARGET_FROM_CUCONTEXT.
  std::vector<JitOption> logs = {{2, 0},    {3, 0x1000}, {4, 4096}, {5, 0x2000},
                                 {6, 4096}, {12, 1},     {8, 0}};
  LoadPlan plan = Plan(image, Sm{8, 6}, logs);
  ASSERT_TRUE(plan.module.has_value()) << plan.why;
  EXPECT_EQ(*plan.module, WarmsModule());
  // CU_JIT_TARGET naming the GPU's own arch is the default too.
  EXPECT_EQ(*Plan(image, Sm{8, 6}, {{9, 86}}).module, WarmsModule());
}

TEST(LoadPlanTest, EveryOptionThatChangesCodeChangesTheModuleId) {
  std::string image = FatbinBytes({{.payload = kPtx}});
  std::vector<KernelId> seen = {WarmsModule()};
  // MAX_REGISTERS, OPTIMIZATION_LEVEL, TARGET (another arch), FALLBACK_STRATEGY, debug and line
  // info, CACHE_MODE, FTZ, PREC_DIV, PREC_SQRT, FMA, POSITION_INDEPENDENT_CODE, MIN_CTA_PER_SM,
  // MAX_THREADS_PER_BLOCK, SPLIT_COMPILE: each with two values.
  for (int option : {0, 7, 9, 10, 11, 13, 14, 21, 22, 23, 24, 30, 31, 32, 34}) {
    for (uint64_t value : {1, 80}) {
      LoadPlan plan = Plan(image, Sm{8, 6}, {{option, value}});
      ASSERT_TRUE(plan.module.has_value()) << option << ": " << plan.why;
      for (const KernelId& other : seen) EXPECT_NE(*plan.module, other) << option << "=" << value;
      seen.push_back(*plan.module);
    }
  }
  // The order the caller gave them in is not part of it.
  EXPECT_EQ(*Plan(image, Sm{8, 6}, {{0, 32}, {21, 1}}).module,
            *Plan(image, Sm{8, 6}, {{21, 1}, {0, 32}}).module);
}

TEST(LoadPlanTest, OptionsKcacheCannotHonourLeaveTheLoadToTheDriver) {
  std::string image = FatbinBytes({{.payload = kPtx}});
  for (const std::vector<JitOption>& options :
       std::vector<std::vector<JitOption>>{
           {{1, 128}},           // THREADS_PER_BLOCK: written back to the caller
           {{17, 0x1000}},       // GLOBAL_SYMBOL_NAMES: pointers
           {{25, 0x1000}},       // REFERENCED_KERNEL_NAMES
           {{99, 1}},            // unknown
           {{0, 32}, {0, 64}}})  // given twice
  {
    LoadPlan plan = Plan(image, Sm{8, 6}, options);
    EXPECT_FALSE(plan.module.has_value()) << options.front().option;
    EXPECT_TRUE(absl::StrContains(plan.why, "JIT option")) << plan.why;
  }
}

}  // namespace
}  // namespace kcache::fatbin
