// The serving rules (docs/serving-rules.md) as pure functions: which artifact targets can run on
// which device, and which candidate is best. Shared by `kcache get --store` and the daemon.
#ifndef KCACHE_CORE_COMPAT_H_
#define KCACHE_CORE_COMPAT_H_

#include <optional>
#include <string>
#include <vector>

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
