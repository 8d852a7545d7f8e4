// A driver load of an in-memory image (cuModuleLoadData, cuModuleLoadDataEx,
// cuModuleLoadFatBinary, cuLibraryLoadData) for one GPU: whether kcache may serve SASS built from
// the image's PTX in its place, and under which PTX module id (ptx_sass.h) that SASS is stored
// (docs/ptx-libraries.md, "Serving at load"). Pure: reads only the bytes given.
#ifndef KCACHE_ENGINE_FATBIN_LOAD_PLAN_H_
#define KCACHE_ENGINE_FATBIN_LOAD_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache::fatbin {

// What the caller's image is.
enum class ImageKind : uint8_t {
  kFatbin,  // a fatbin's bytes (magic kFatbinMagic), from its header to its declared end
  kPtx,     // PTX text, without its terminating NUL
};

// One JIT option a caller passed with a load: its CUjit_option number and the integer its value
// pointer holds.
struct JitOption {
  int option = 0;
  uint64_t value = 0;
};

// What to do with one load.
struct LoadPlan {
  // The PTX module id (PtxModuleId) whose SASS for the GPU may be served instead of the image:
  // the PTX the driver would JIT (PlanLibrary's pick for the GPU's SM), its entry's options, and
  // the compile options warm builds with (PtxSassCompileOptions), followed by each option of
  // `options` that changes code, as "cujit:<number>=<value>", in number order. nullopt: the load
  // is left to the driver, for the reason `why` says.
  std::optional<KernelId> module;
  std::string ptx;  // module set: what is served from, e.g. "PTX compute_75 (zstd, 814 B)"
  std::string why;  // module unset: "has SASS sm_86", "JIT option 1 (...) is not keyed", ...
  // module set, with no JIT option that is keyed: the PTX's text, which kcached can build the
  // same SASS from (ArtifactCache::BuildFromPtx keys it as `module`) for the next load when
  // none is held; "" otherwise (a load with keyed options is only served what warm built).
  std::string buildable_ptx;
};

// The plan for loading `image` (of `kind`) on a GPU of compute capability `gpu` with `options`.
// Left to the driver: an image with SASS that runs on `gpu`, or with no PTX at or below it; a
// damaged fatbin (the driver says what it says of it); relocatable device code; a JIT option that
// writes back to the caller (CU_JIT_THREADS_PER_BLOCK), names memory (symbol and kernel name
// lists), is given twice, or is unknown; a CU_JIT_TARGET other than `gpu`. Options that only
// ask for logs or the wall time are not keyed: the driver answers them for the SASS it loads.
LoadPlan PlanLoad(absl::string_view image, ImageKind kind, Sm gpu,
                  const std::vector<JitOption>& options);

}  // namespace kcache::fatbin

#endif  // KCACHE_ENGINE_FATBIN_LOAD_PLAN_H_
