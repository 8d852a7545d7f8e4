// PlanLoad (load_plan.h): a driver load's image read as `kcache warm --library` reads a library,
// so that a load finds the SASS warm built from the same PTX.
#include "engine/fatbin/load_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/library.h"
#include "engine/fatbin/library_plan.h"
#include "engine/fatbin/ptx_sass.h"

namespace kcache::fatbin {
namespace {

// CUjit_option numbers (cuda.h), by what a load that passes them gets.
enum class OptionUse : uint8_t {
  kNotKeyed,  // asks for logs or the wall time: the driver answers them for whatever it loads
  kKeyed,     // changes the code built: part of the module id
  kLeft,      // the load is left to the driver
};

struct KnownOption {
  int number;
  const char* name;
  OptionUse use;
};

constexpr int kJitTarget = 9;  // CU_JIT_TARGET: keyed unless it names the GPU's own arch

constexpr KnownOption kOptions[] = {
    {0, "CU_JIT_MAX_REGISTERS", OptionUse::kKeyed},
    {1, "CU_JIT_THREADS_PER_BLOCK", OptionUse::kLeft},  // written back to the caller
    {2, "CU_JIT_WALL_TIME", OptionUse::kNotKeyed},
    {3, "CU_JIT_INFO_LOG_BUFFER", OptionUse::kNotKeyed},
    {4, "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES", OptionUse::kNotKeyed},
    {5, "CU_JIT_ERROR_LOG_BUFFER", OptionUse::kNotKeyed},
    {6, "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", OptionUse::kNotKeyed},
    {7, "CU_JIT_OPTIMIZATION_LEVEL", OptionUse::kKeyed},
    {8, "CU_JIT_TARGET_FROM_CUCONTEXT", OptionUse::kNotKeyed},  // the default: the GPU's
    {kJitTarget, "CU_JIT_TARGET", OptionUse::kKeyed},
    {10, "CU_JIT_FALLBACK_STRATEGY", OptionUse::kKeyed},
    {11, "CU_JIT_GENERATE_DEBUG_INFO", OptionUse::kKeyed},
    {12, "CU_JIT_LOG_VERBOSE", OptionUse::kNotKeyed},
    {13, "CU_JIT_GENERATE_LINE_INFO", OptionUse::kKeyed},
    {14, "CU_JIT_CACHE_MODE", OptionUse::kKeyed},  // -dlcm: the loads' cache operators
    {16, "CU_JIT_FAST_COMPILE", OptionUse::kKeyed},
    {17, "CU_JIT_GLOBAL_SYMBOL_NAMES", OptionUse::kLeft},  // pointers
    {18, "CU_JIT_GLOBAL_SYMBOL_ADDRESSES", OptionUse::kLeft},
    {19, "CU_JIT_GLOBAL_SYMBOL_COUNT", OptionUse::kLeft},
    {20, "CU_JIT_LTO", OptionUse::kKeyed},
    {21, "CU_JIT_FTZ", OptionUse::kKeyed},
    {22, "CU_JIT_PREC_DIV", OptionUse::kKeyed},
    {23, "CU_JIT_PREC_SQRT", OptionUse::kKeyed},
    {24, "CU_JIT_FMA", OptionUse::kKeyed},
    {25, "CU_JIT_REFERENCED_KERNEL_NAMES", OptionUse::kLeft},
    {26, "CU_JIT_REFERENCED_KERNEL_COUNT", OptionUse::kLeft},
    {27, "CU_JIT_REFERENCED_VARIABLE_NAMES", OptionUse::kLeft},
    {28, "CU_JIT_REFERENCED_VARIABLE_COUNT", OptionUse::kLeft},
    {29, "CU_JIT_OPTIMIZE_UNUSED_DEVICE_VARIABLES", OptionUse::kKeyed},
    {30, "CU_JIT_POSITION_INDEPENDENT_CODE", OptionUse::kKeyed},
    {31, "CU_JIT_MIN_CTA_PER_SM", OptionUse::kKeyed},
    {32, "CU_JIT_MAX_THREADS_PER_BLOCK", OptionUse::kKeyed},
    {33, "CU_JIT_OVERRIDE_DIRECTIVE_VALUES", OptionUse::kKeyed},
    {34, "CU_JIT_SPLIT_COMPILE", OptionUse::kKeyed},
};

const KnownOption* Known(int number) {
  for (const KnownOption& o : kOptions) {
    if (o.number == number) return &o;
  }
  return nullptr;
}

// The compile options a load's SASS is keyed by: warm's, then the keyed JIT options; false with
// `why` when the load is left to the driver.
bool KeyedOptions(Sm gpu, const std::vector<JitOption>& options, std::vector<std::string>* keyed,
                  std::string* why) {
  std::vector<JitOption> sorted = options;
  std::sort(sorted.begin(), sorted.end(),
            [](const JitOption& a, const JitOption& b) { return a.option < b.option; });
  *keyed = PtxSassCompileOptions();
  for (size_t i = 0; i < sorted.size(); ++i) {
    const JitOption& o = sorted[i];
    const KnownOption* known = Known(o.option);
    if (known == nullptr) {
      *why = absl::StrCat("JIT option ", o.option, " is unknown to kcache");
      return false;
    }
    if (i > 0 && sorted[i - 1].option == o.option) {
      *why = absl::StrCat("JIT option ", known->name, " is given twice");
      return false;
    }
    if (known->use == OptionUse::kLeft) {
      *why = absl::StrCat("JIT option ", known->name, " is not served by kcache");
      return false;
    }
    if (known->use == OptionUse::kNotKeyed) continue;
    if (o.option == kJitTarget && o.value == static_cast<uint64_t>(gpu.arch())) continue;
    keyed->push_back(absl::StrCat("cujit:", o.option, "=", o.value));
  }
  return true;
}

}  // namespace

LoadPlan PlanLoad(absl::string_view image, ImageKind kind, Sm gpu,
                  const std::vector<JitOption>& options) {
  LoadPlan plan;
  std::vector<std::string> keyed;
  if (!KeyedOptions(gpu, options, &keyed, &plan.why)) return plan;
  if (kind == ImageKind::kPtx) {
    plan.module = PtxModuleId(image, "", keyed);
    plan.ptx = absl::StrCat("PTX text (", image.size(), " B)");
    if (keyed == PtxSassCompileOptions()) plan.buildable_ptx = std::string(image);
    return plan;
  }
  absl::StatusOr<Library> library = Library::FromBytes(image, "the image");
  if (!library.ok()) {
    plan.why = absl::StrCat("the fatbin does not read (", library.status().message(), ")");
    return plan;
  }
  TargetPlan target = PlanLibrary(*library, {Target{TargetKind::kSass, gpu}}).front();
  const std::vector<FatbinEntry>& entries = library->entries();
  switch (target.decision) {
    case TargetPlan::Decision::kHasSass:
      plan.why = absl::StrCat("it has SASS that runs on ", gpu.ToString(), ": ",
                              entries[*target.sass_entry].Describe());
      return plan;
    case TargetPlan::Decision::kNoCode:
      plan.why = target.note;
      return plan;
    case TargetPlan::Decision::kBuild:
      break;
  }
  const FatbinEntry& entry = entries[*target.ptx_entry];
  absl::StatusOr<std::string> ptx = EntryPayload(entry, "the image");
  if (!ptx.ok()) {
    plan.why = absl::StrCat("its PTX does not read (", ptx.status().message(), ")");
    return plan;
  }
  plan.module = PtxModuleId(*ptx, entry.jit_options, keyed);
  plan.ptx = entry.Describe();
  if (entry.jit_options.empty() && keyed == PtxSassCompileOptions()) {
    plan.buildable_ptx = *std::move(ptx);
  }
  return plan;
}

}  // namespace kcache::fatbin
