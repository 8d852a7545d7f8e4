// Resolving a kernel for a device: the serving rules of DESIGN.md applied to what one or more
// stores hold, with compile-on-miss when a compiler is given. This is the ONE implementation of
// the rules: `kcache get --store` answers through ResolveFromStore (one store), and the daemon's
// artifact cache (artifact_cache.h) through LookupStored over its tiers plus the compile gate
// below, so both give the same answer and the same reasons.
#ifndef KCACHE_ENGINE_RESOLVE_RESOLVER_H_
#define KCACHE_ENGINE_RESOLVE_RESOLVER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/artifact.h"
#include "core/compat.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache {

class Compiler;
class Store;
struct CompileJob;

// The device a worker runs on.
struct Device {
  Sm sm;
  uint32_t driver = 0;  // CUDA driver version (cuDriverGetVersion, e.g. 13000); 0 = unknown
};

struct Resolution {
  Artifact artifact;
  ServeRule rule = ServeRule::kExactSass;
  std::string
      reason;  // one line: why this artifact, e.g. "no sm_89 cubin; sm_86 cubin runs on 8.9"
  bool needs_jit() const { return rule == ServeRule::kPtxJit; }
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
};
absl::string_view MissReasonName(MissReason reason);  // "unknown_kernel", "below_min_arch", ...
inline constexpr char kMissReasonPayload[] = "kcache.dev/miss-reason";
// The reason carried by `status`, or nullopt when it carries none.
std::optional<MissReason> MissReasonOf(const absl::Status& status);
// `status` with `reason` attached (the code, message and other payloads are kept).
absl::Status WithMissReason(absl::Status status, MissReason reason);

// The artifacts of `id` ordered best first for `device` by the serving rules (CUBIN and PTX
// only; an artifact whose min_driver is above a known driver is left out). Exposed for tests.
std::vector<ArtifactMeta> RankCandidates(const std::vector<ArtifactMeta>& artifacts,
                                         const Device& device);

// One line saying why `meta` serves `device` under `rule`.
std::string ServeReason(ServeRule rule, const ArtifactMeta& meta, const Device& device);

// OK when `device` lies in the kernel's declared range; otherwise NotFound naming the bound
// (reason kBelowMinArch or kAboveMaxArch).
absl::Status CheckArchRange(const KernelRecord& record, const Device& device);

// The stores the rules read, upper tier first (the daemon: its writable store, then the
// baked stores in order). Implementations may skip a tier (answering Unavailable); an error
// other than NotFound means that tier failed, and the rules go on with the others.
class StoreTiers {
 public:
  virtual ~StoreTiers() = default;
  virtual size_t size() const = 0;
  virtual absl::StatusOr<KernelRecord> GetKernel(size_t tier, const KernelId& id) = 0;
  virtual absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(size_t tier,
                                                                  const KernelId& id) = 0;
  virtual absl::StatusOr<Artifact> Get(size_t tier, const ArtifactKey& key) = 0;
};

// What the stores hold for one (kernel, device): steps 1-3 of the rules.
struct StoredLookup {
  std::optional<KernelRecord> record;  // from the first tier that has one
  std::optional<Resolution> hit;       // the best stored artifact that read back intact
  size_t hit_tier = 0;                 // which tier `hit` was read from
  int tiers_answered = 0;              // tiers whose artifact listing succeeded
  absl::Status first_failure;          // the first tier error seen (OK when none)
};

// Finds the kernel's record (first tier that has it) and refuses a device outside its declared
// range (NotFound, kBelowMinArch / kAboveMaxArch) even if some artifact would load. Then ranks
// the candidates of every tier together (RankCandidates) and reads them best first; the same
// artifact held by several tiers is read from the upper one first. A candidate that does not
// read back (corrupt: the store counted and dropped it; or its tier failing) is skipped for the
// next. No hit is not an error: see CheckCompileAllowed.
absl::StatusOr<StoredLookup> LookupStored(StoreTiers& tiers, const KernelId& id,
                                          const Device& device);

// Steps 4-5 when nothing stored fits: OK when a compile may run; otherwise NotFound saying why
// (kUnknownKernel when `record` is null, kCompileNotAllowed, kNoToolkit), with what to do.
absl::Status CheckCompileAllowed(const KernelId& id, const KernelRecord* record,
                                 const Device& device, bool allow_compile, bool have_compiler);

// The compile a miss runs: plain SASS for the device's SM (which also yields its PTX), plus
// LTO-IR when the kernel wants it, so a miss writes what `kcache warm` writes for that target.
CompileJob CompileJobFor(const KernelRecord& record, const Device& device);

// Serves kernel `id` for `device` from `store`:
//   1-3. the best stored artifact by the serving rules (a corrupt entry is skipped: the next
//        best is tried, and the bad one counts in the store's statistics);
//   4.   otherwise, if `compiler` is non-null and the store has the kernel's record, compiles
//        for the device's SM, stores the result and serves it (rule kCompiled);
//   5.   otherwise NotFound with the reason: kernel unknown, device below the kernel's
//        declared min_arch (or above max_arch), no toolkit to compile with, or (Aborted) the
//        compile error with its NVRTC log. A failing store answers its own error.
// A device below the kernel's declared min_arch is refused even if some artifact would load.
absl::StatusOr<Resolution> ResolveFromStore(Store& store, const KernelId& id, const Device& device,
                                            Compiler* compiler);

// Finds kernels by display name or by hex id (full or a unique prefix of at least 8 digits).
// Several records with one name (a kernel edited and warmed again): the most recently
// registered wins. NotFound naming what was asked, with a hint to run `kcache ls`.
absl::StatusOr<KernelRecord> FindKernel(Store& store, absl::string_view name_or_id);

}  // namespace kcache

#endif  // KCACHE_ENGINE_RESOLVE_RESOLVER_H_
