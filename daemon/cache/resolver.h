// Resolving a kernel for a device: the serving rules of DESIGN.md applied to what a store
// holds, with compile-on-miss when a compiler is given. `kcache get --store` and the daemon
// both answer through here.
#ifndef KCACHE_DAEMON_CACHE_RESOLVER_H_
#define KCACHE_DAEMON_CACHE_RESOLVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/artifact.h"
#include "core/compat.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache {

class Compiler;
class Store;

// The device a worker runs on.
struct Device {
  Sm sm;
  uint32_t driver = 0;  // CUDA driver version (cuDriverGetVersion, e.g. 13000); 0 = unknown
};

struct Resolution {
  Artifact artifact;
  ServeRule rule = ServeRule::kExactSass;
  std::string reason;  // one line: why this artifact, e.g. "no sm_89 cubin; sm_86 cubin runs on 8.9"
  bool needs_jit() const { return rule == ServeRule::kPtxJit; }
};

// The artifacts of `id` ordered best first for `device` by the serving rules (CUBIN and PTX
// only; an artifact whose min_driver is above a known driver is left out). Exposed for tests
// and `kcache get --explain`.
std::vector<ArtifactMeta> RankCandidates(const std::vector<ArtifactMeta>& artifacts,
                                         const Device& device);

// Serves kernel `id` for `device` from `store`:
//   1-3. the best stored artifact by the serving rules (a corrupt entry is skipped: the next
//        best is tried, and the bad one counts in the store's statistics);
//   4.   otherwise, if `compiler` is non-null and the store has the kernel's record, compiles
//        for the device's SM, stores the result and serves it (rule kCompiled);
//   5.   otherwise NotFound with the reason: kernel unknown, device below the kernel's
//        declared min_arch (or above max_arch), no toolkit to compile with, or (Aborted) the
//        compile error with its NVRTC log.
// A device below the kernel's declared min_arch is refused even if some artifact would load.
absl::StatusOr<Resolution> ResolveFromStore(Store& store, const KernelId& id,
                                            const Device& device, Compiler* compiler);

// Finds kernels by display name or by hex id (full or a unique prefix of at least 8 digits).
// Several records with one name (a kernel edited and warmed again): the most recently
// registered wins. NotFound naming what was asked, with a hint to run `kcache ls`.
absl::StatusOr<KernelRecord> FindKernel(Store& store, absl::string_view name_or_id);

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_RESOLVER_H_
