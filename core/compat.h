// The serving rules (docs/serving-rules.md) as pure functions and their vocabulary: which
// artifact targets can run on which device, which candidate is best, the device a request is
// for, the rule an answer was served under and the reason nothing was. Shared by every layer.
#ifndef KCACHE_CORE_COMPAT_H_
#define KCACHE_CORE_COMPAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/target.h"

namespace kcache {

// Why an artifact may serve a device, best first. Numbered and stable: they travel on the wire.
enum class ServeRule : int {
  kExactSass = 1,       // a cubin for exactly the device's SM (plain, a or f)
  kCompatibleSass = 2,  // a cubin for the same major and a lower minor (plain or f)
  kPtxJit = 3,          // PTX at or below the device; the driver must JIT it
  kCompiled = 4,        // nothing stored fitted; compiled for the device on this request
};
absl::string_view ServeRuleName(ServeRule rule);  // "exact_sass", "compatible_sass", ...

// The device a worker runs on.
struct Device {
  Sm sm;
  uint32_t driver = 0;  // CUDA driver version (cuDriverGetVersion, e.g. 13000); 0 = unknown
};

// Why nothing was served. Numbered and stable (statistics and the wire name them). Every
// refusal the rules produce carries its reason as the payload kMissReasonPayload (the name,
// e.g. "no_toolkit"), so callers count and report it without parsing messages.
enum class MissReason : int {
  kUnknownKernel = 1,      // no record and no servable artifact in any store
  kBelowMinArch = 2,       // device below the kernel's declared min_arch
  kAboveMaxArch = 3,       // device above the kernel's declared max_arch
  kNoToolkit = 4,          // nothing stored fits and no compiler is loaded
  kCompileNotAllowed = 5,  // nothing stored fits and the request forbade compiling
  kCompileError = 6,       // the compile failed (Aborted, NVRTC log attached)
  kNothingServable = 7,    // anything else: compile limits, unsupported target, tiers failing
  kDriverTooOld = 8,  // what is stored, and what every loaded toolkit builds, needs a newer driver
};
absl::string_view MissReasonName(MissReason reason);  // "unknown_kernel", "below_min_arch", ...
inline constexpr char kMissReasonPayload[] = "kcache.dev/miss-reason";
// The reason carried by `status`, or nullopt when it carries none.
std::optional<MissReason> MissReasonOf(const absl::Status& status);
// `status` with `reason` attached (the code, message and other payloads are kept).
absl::Status WithMissReason(absl::Status status, MissReason reason);

// The rule under which code built for `target` may run on `device`, or nullopt if it must not:
//   sm_XY / sm_XYa / sm_XYf on X.Y                    -> kExactSass
//   sm_XZ or sm_XZf on X.Y with Z < Y                 -> kCompatibleSass
//   sm_XZa on anything but X.Z; any SASS of another major or a higher minor -> nullopt
//   compute_NN (plain) with NN <= device arch          -> kPtxJit
//   compute_XYa only on X.Y; compute_XZf on X.Y, Z <= Y -> kPtxJit
// Never returns kCompiled. Whether the device's driver can JIT the PTX is checked elsewhere.
std::optional<ServeRule> CompatibilityOf(const Target& target, Sm device);

// Orders two targets that both fit `device` (CompatibilityOf non-null): true when `a` is the
// better choice. Better rule first; within compatible SASS the higher minor; within PTX the
// higher arch; on ties plain over f over a.
bool BetterFor(Sm device, const Target& a, const Target& b);

// The index of the best target in `candidates` for `device`, or nullopt if none fits.
std::optional<size_t> PickBest(const std::vector<Target>& candidates, Sm device);

}  // namespace kcache

#endif  // KCACHE_CORE_COMPAT_H_
