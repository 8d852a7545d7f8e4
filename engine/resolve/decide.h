// The decision: the serving rules (docs/serving-rules.md) applied to what stores hold and what
// the loaded toolkits can build. DecideResolve is the ONE decision: `kcache get --store` and
// libkcache's local fallback run it to the end in process (engine/resolve/in_process.h), and
// the daemon's artifact cache runs it over its tiers and adds only the memory tier,
// write-back and single-flight around it, so every path gives the same rule, reason and bytes
// for the same (kernel, device, driver, policy).
#ifndef KCACHE_ENGINE_RESOLVE_DECIDE_H_
#define KCACHE_ENGINE_RESOLVE_DECIDE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/answer.h"
#include "core/artifact.h"
#include "core/compat.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "engine/compile/compiler.h"

namespace kcache {

// The artifacts of `id` ordered best first for `device` by the serving rules (CUBIN and PTX
// only; an artifact whose min_driver is above a known driver is left out). The same target
// from several toolkits: the newest toolkit's first (highest min_driver), then the newest made.
// Exposed for tests.
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
  std::optional<Answer> hit;           // the best stored artifact that read back intact
  size_t hit_tier = 0;                 // which tier `hit` was read from
  int tiers_answered = 0;              // tiers whose artifact listing succeeded
  absl::Status first_failure;          // the first tier error seen (OK when none)
  // The lowest min_driver of the stored artifacts that would run on the device but that its
  // (known) driver cannot load; 0 when none was left out for the driver.
  uint32_t refused_min_driver = 0;
};

// Finds the kernel's record (first tier that has it) and refuses a device outside its declared
// range (NotFound, kBelowMinArch / kAboveMaxArch) even if some artifact would load. Then ranks
// the candidates of every tier together (RankCandidates) and reads them best first; the same
// artifact held by several tiers is read from the upper one first. A candidate that does not
// read back (corrupt: the store counted and dropped it; or its tier failing) is skipped for the
// next. No hit is not an error: see DecideResolve. `held`, when given, is an artifact the
// caller already read back intact from a tier: a candidate with its key and checksum is taken
// from it instead of being read again.
absl::StatusOr<StoredLookup> LookupStored(StoreTiers& tiers, const KernelId& id,
                                          const Device& device,
                                          const std::shared_ptr<const Artifact>& held = nullptr);

// What a caller allows when nothing stored is the best answer (docs/serving-rules.md, "The
// decision").
struct ResolvePolicy {
  // False: answer from the stores only; NotFound (kCompileNotAllowed) when nothing there fits.
  bool allow_compile = true;
  // When the best stored answer is PTX and a toolkit could build the device's SASS: true takes
  // the PTX now (the caller compiles the SASS for later callers: the daemon in the
  // background), false waits for the SASS. A driver JIT at every worker start is the stall
  // kcache removes, so the default waits.
  bool ptx_now = false;
  // An artifact the caller already holds, read back intact from a tier (the start-up warm's
  // read): not read again when it is the answer (LookupStored), and served as the same bytes.
  std::shared_ptr<const Artifact> held = nullptr;
};

// What to do for one (kernel, device, policy): the decision table.
//   stored answer | SASS compilable | ptx_now | action
//   SASS          | -               | -       | kServe
//   PTX           | yes             | false   | kCompile
//   PTX           | yes             | true    | kServeAndCompile
//   PTX           | no              | -       | kServe (the driver JITs it)
//   none          | yes             | -       | kCompile
//   none          | no: PTX below   | -       | kCompile of compute_XX (PTX; see DecideResolve)
//   none          | no              | -       | a miss, with its reason
struct ResolveDecision {
  std::optional<KernelRecord> record;  // the kernel's record: stored (first tier) or as sent
  // A stored artifact: the answer (kServe, kServeAndCompile), or the PTX to fall back on when
  // the compile of kCompile fails for a reason other than a compile error.
  std::optional<Answer> stored;
  size_t stored_tier = 0;  // which tier `stored` was read from
  // kCompile, kServeAndCompile: the job, for the toolkit at index `toolkit` of those given.
  std::optional<CompileJob> compile;
  size_t toolkit = 0;
  enum class Action {
    kServe,            // serve `stored`
    kCompile,          // run `compile` and serve its output (the SASS, or PTX for compute_ jobs)
    kServeAndCompile,  // serve `stored` (PTX) now, and run `compile` for later callers
  };
  Action action = Action::kServe;
};

// The one decision (the table above). `device.sm` is valid (ValidateDeviceSm): checked once,
// where the request was made (kcached's edge, ResolveInProcess). Refuses a device outside the
// kernel's declared range (NotFound, kBelowMinArch / kAboveMaxArch). Reads
// the best stored artifact the device and its driver can load (LookupStored). "SASS
// compilable": the record is known, the policy allows it, and a toolkit the driver can load
// supports the device's SM; of several, the newest (PickToolkit). When nothing is stored and
// no toolkit supports the SM, but one supports a lower arch whose PTX the driver loads, the
// decision compiles that compute_XX PTX. Otherwise NotFound with the reason: kUnknownKernel
// (no record stored and no spec `sent`), kCompileNotAllowed, kNoToolkit, kDriverTooOld (naming
// the driver and what it needs), kNothingServable (no toolkit supports the SM); Unavailable
// when every tier failed and the spec is unknown. `sent` is the caller's spec, used when no
// store holds the record (its id must be `id`).
absl::StatusOr<ResolveDecision> DecideResolve(StoreTiers& tiers, const KernelId& id,
                                              const KernelRecord* sent, const Device& device,
                                              const ResolvePolicy& policy,
                                              absl::Span<const Toolkit* const> toolkits);

// The newest of `toolkits` whose output `driver` loads (0: any) and that supports `arch`, or
// nullopt.
std::optional<size_t> PickToolkit(absl::Span<const Toolkit* const> toolkits, uint32_t driver,
                                  int arch);

// The compile a miss runs: plain SASS for the device's SM (which also yields its PTX), plus
// LTO-IR when the kernel wants it, so a miss writes what `kcache warm` writes for that target.
CompileJob CompileJobFor(const KernelRecord& record, const Device& device);

// The answer a finished compile gives: its cubin for a sm_ job (rule kCompiled), its PTX for a
// compute_ job (kPtxJit, the device's SM being one no loaded toolkit supports).
ArtifactKind ServedKindOf(const CompileJob& job);
ServeRule CompiledRule(const CompileJob& job);
std::string CompiledReason(const CompileJob& job, const ArtifactMeta& meta, const Device& device);
// Internal (kNothingServable): a finished compile whose output lacks what it should serve.
absl::Status CompiledNothingServable(const CompileJob& job);

// A decision's compile failed with `failure`: OK when the stored PTX is the answer (a failure
// other than a compile error: limits, a crashed worker; the PTX still runs), else the miss: a
// compile error (Aborted, the NVRTC log attached) as kCompileError, anything else as
// kNothingServable.
absl::Status MissAfterFailedCompile(const ResolveDecision& decision, absl::Status failure);

}  // namespace kcache

#endif  // KCACHE_ENGINE_RESOLVE_DECIDE_H_
