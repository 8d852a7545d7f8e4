// CompileFlights: compiles each (kernel, target) once however many ask at the same moment —
// resolve misses and warm jobs alike — stores the result in the writable store and drops the
// kernel's memory entries (its best answer for some devices may have changed).
#ifndef KCACHE_DAEMON_CACHE_COMPILE_FLIGHTS_H_
#define KCACHE_DAEMON_CACHE_COMPILE_FLIGHTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/artifact.h"
#include "daemon/cache/memory_lru.h"
#include "daemon/cache/single_flight.h"
#include "daemon/cache/statistics.h"
#include "daemon/cache/store_tiers.h"
#include "engine/compile/compiler.h"

namespace kcache {

// What one flight produced, shared by every caller of it.
struct CompiledSet {
  std::vector<std::shared_ptr<const Artifact>> artifacts;  // immutable
  bool from_store = false;  // an earlier flight had stored them all: nothing was compiled
  // The artifact of `kind` for `target`, or null.
  std::shared_ptr<const Artifact> Find(ArtifactKind kind, const Target& target) const;
};
using CompileResult = absl::StatusOr<std::shared_ptr<const CompiledSet>>;

// Thread-safe. Borrows everything it is given; all must outlive it.
class CompileFlights {
 public:
  CompileFlights(Compiler* compiler, TieredStores* tiers, MemoryLru* memory, Statistics* stats)
      : compiler_(compiler), tiers_(tiers), memory_(memory), stats_(stats) {}

  // Runs or joins the flight for (job.id, job.target). The one that runs it first looks in the
  // writable store for what `job` would write (a flight that just ended may have stored it),
  // else compiles, stores each artifact (a failing store is counted and skipped: the result is
  // still returned) and invalidates the kernel's memory entries. `*waited` says whether this
  // caller joined another's flight. Errors are the compiler's (Aborted with the NVRTC log).
  CompileResult CompileOnce(const CompileJob& job, bool* waited = nullptr);

  // A Compiler whose compiles go through CompileOnce, for engine/warm's Warm(): a warm and a
  // miss for the same artifact compile once. Borrows this.
  std::unique_ptr<Compiler> AsCompiler();

 private:
  CompileResult Run(const CompileJob& job);
  std::shared_ptr<const CompiledSet> FindStored(const CompileJob& job);

  Compiler* compiler_;
  TieredStores* tiers_;
  MemoryLru* memory_;
  Statistics* stats_;
  SingleFlight<std::string, CompileResult> flights_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_COMPILE_FLIGHTS_H_
