// Whether one artifact runs on one GPU: the serving rules (core/compat.h) applied to an
// artifact's kind, target and driver need, and a GPU's SM and driver. The serving decision
// (engine/resolve) ranks stored artifacts with ArtifactRunsOn and DriverLoads; libkcache checks a
// fetched kernel against the GPU that loads it with CheckArtifactForGpu before loading it.
#ifndef KCACHE_CORE_LOAD_CHECK_H_
#define KCACHE_CORE_LOAD_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"
#include "core/compat.h"
#include "core/target.h"

namespace kcache {

// The rule under which code of `kind` built for `target` runs on a GPU of SM `sm`, its driver
// aside, or nullopt: LTO-IR never runs (it must be linked first), a cubin must be built for a
// sm_ target and PTX for a compute_ one, and then CompatibilityOf decides.
std::optional<ServeRule> ArtifactRunsOn(ArtifactKind kind, const Target& target, Sm sm);

// Whether a driver (cuDriverGetVersion, e.g. 13000; 0 = unknown, assumed new enough) loads an
// artifact that needs `min_driver` (ArtifactMeta::min_driver; 0 = any driver).
bool DriverLoads(uint32_t driver, uint32_t min_driver);

// Whether a driver loads `bytes`, a value a client stored (the Redis door's,
// docs/torch-compile.md), where the bytes say: OK when they are not a CUDA ELF file (IsCudaElf in
// core/cubin.h: nothing to check), when `driver` is 0 (unknown: not checked), or when the cubin's
// toolkit (CubinToolkit) is one the driver loads (MinDriverFor, DriverLoads). FailedPrecondition
// naming both when the driver is older, e.g. "a cubin built by CUDA 13.0 needs driver 13.0 or
// newer; the driver is 12.9"; InvalidArgument, naming why, for a cubin whose toolkit cannot be read
// (then nobody can say that it loads).
absl::Status CheckCubinForDriver(absl::string_view bytes, uint32_t driver);

// The GPU about to load an artifact.
struct LoadingGpu {
  int ordinal = 0;      // CUDA device ordinal in this process
  std::string name;     // "NVIDIA H100 80GB HBM3"; "" when unknown
  Sm sm;                // its compute capability
  uint32_t driver = 0;  // the driver's version; 0 = unknown (not checked)
};

// The artifact about to be loaded, as a client holds it.
struct LoadingArtifact {
  std::string kernel_name;  // display name; "" = "the kernel"
  ArtifactKind kind = ArtifactKind::kCubin;
  std::string target;       // "sm_89", "compute_90", "sm_90a"
  uint32_t min_driver = 0;  // oldest driver that loads it; 0 = any
};

// OK when `artifact` runs on `gpu` (ArtifactRunsOn and DriverLoads). Otherwise:
//   InvalidArgument for LTO-IR ("... is LTO-IR, which the driver cannot load: link it first"),
//     a target that does not parse, or a kind that does not match its target;
//   FailedPrecondition naming the kernel, its target, the GPU and what to do, e.g.
//     "softmax is sm_89 SASS; GPU 0 is NVIDIA H100 (sm_90): resolve it for 9.0 (sm_89 SASS runs
//     only on 8.9 and later 8.x GPUs)", or, for the driver, "softmax is compute_90 PTX that
//     needs driver 13.1 or newer; GPU 0 is NVIDIA H100 (sm_90) with driver 13.0: update the
//     driver, or resolve it for 9.0 with driver 13000".
// Pure: no driver is called.
absl::Status CheckArtifactForGpu(const LoadingArtifact& artifact, const LoadingGpu& gpu);

}  // namespace kcache

#endif  // KCACHE_CORE_LOAD_CHECK_H_
