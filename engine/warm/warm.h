// kcache warm: compiles every (kernel x target) of a manifest into a store, skipping what the
// store already holds and what a kernel's declared architecture range excludes.
#ifndef KCACHE_ENGINE_WARM_WARM_H_
#define KCACHE_ENGINE_WARM_WARM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/manifest.h"
#include "core/target.h"

namespace kcache {

class Compiler;
class Store;

enum class WarmOutcome { kBuilt, kCached, kSkipped, kFailed };
absl::string_view WarmOutcomeName(WarmOutcome outcome);  // "built", "cached", ...

struct WarmJob {
  const ManifestKernel* kernel = nullptr;  // points into the Manifest given to Warm()
  Target target;
  int64_t expected_ms = 0;  // what ordering used: the store's last compile time or the cost hint
};

struct WarmJobResult {
  WarmJob job;
  WarmOutcome outcome = WarmOutcome::kBuilt;
  int64_t micros = 0;              // compile (or lookup) wall time
  uint64_t bytes = 0;              // payload bytes written (built) or found (cached)
  std::vector<std::string> kinds;  // artifacts written or found: "cubin", "ptx", "ltoir"
  std::string message;             // skip reason, or the error with the full NVRTC log
};

struct WarmSummary {
  int built = 0, cached = 0, skipped = 0, failed = 0;
  int64_t wall_micros = 0;
  std::vector<WarmJobResult> results;  // in completion order
  bool ok() const { return failed == 0; }
};

// Receives progress; called from worker threads but never concurrently (Warm serializes).
class WarmObserver {
 public:
  virtual ~WarmObserver() = default;
  virtual void OnPlan(const std::vector<WarmJob>& jobs) {}
  virtual void OnJobStart(const WarmJob& job) {}
  virtual void OnJobDone(const WarmJobResult& result, int done, int total) {}
};

struct WarmOptions {
  std::vector<Target> targets;  // already validated against the compiler's toolkit
  int jobs = 0;                 // parallel compiles; 0 = one per core
};

// The (kernel x target) jobs, longest expected first. A kernel whose declared range excludes
// a target is still listed (it becomes a skip, said so in the summary).
std::vector<WarmJob> PlanWarm(const Manifest& manifest, const std::vector<Target>& targets,
                              Store& store);

// Registers every manifest kernel in the store (so misses can be compiled later), then runs
// the plan with options.jobs threads. A job is "cached" when every artifact it would write
// is already in the store, verifies and is listed (so a second warm compiles nothing; one
// whose listing entry was lost is written again, "listing entries rebuilt"); a corrupt entry
// is rebuilt. Returns an error only when the store itself fails; compile errors are
// results (outcome kFailed) so one bad kernel does not hide the others.
absl::StatusOr<WarmSummary> Warm(const Manifest& manifest, const WarmOptions& options, Store& store,
                                 Compiler& compiler, WarmObserver* observer);

}  // namespace kcache

#endif  // KCACHE_ENGINE_WARM_WARM_H_
