#include "daemon/cache/compile_flights.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/compile/toolkit.h"

namespace kcache {
namespace {

using Clock = std::chrono::steady_clock;

// Identifies a flight: the kernel and the target (the artifacts it yields follow from them).
std::string FlightKey(const CompileJob& job) {
  return absl::StrCat(job.id.Bytes(), "/", job.target.ToString());
}

// What a compile of `job` writes: the cubin (SASS targets), the PTX, and LTO-IR when asked.
std::vector<ArtifactKey> ExpectedKeys(const CompileJob& job, const std::string& toolkit_id) {
  Target ptx = job.target.WithKind(TargetKind::kPtx);
  std::vector<ArtifactKey> keys;
  if (job.target.kind == TargetKind::kSass) {
    keys.push_back(ArtifactKey{job.id, ArtifactKind::kCubin, job.target, toolkit_id, 0});
  }
  keys.push_back(ArtifactKey{job.id, ArtifactKind::kPtx, ptx, toolkit_id, 0});
  if (job.want_ltoir) keys.push_back(ArtifactKey{job.id, ArtifactKind::kLtoir, ptx, toolkit_id, 0});
  return keys;
}

class FlightCompiler : public Compiler {
 public:
  FlightCompiler(CompileFlights* flights, Compiler* inner) : flights_(flights), inner_(inner) {}

  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) override {
    CompileResult result = flights_->CompileOnce(job);
    if (!result.ok()) return result.status();
    CompileOutput output;
    for (const std::shared_ptr<const Artifact>& artifact : (*result)->artifacts) {
      output.artifacts.push_back(*artifact);
    }
    return output;
  }
  const Toolkit& toolkit() const override { return inner_->toolkit(); }

 private:
  CompileFlights* flights_;
  Compiler* inner_;
};

}  // namespace

std::shared_ptr<const Artifact> CompiledSet::Find(ArtifactKind kind, const Target& target) const {
  for (const std::shared_ptr<const Artifact>& artifact : artifacts) {
    if (artifact->meta.key.kind == kind && artifact->meta.key.target == target) return artifact;
  }
  return nullptr;
}

CompileResult CompileFlights::CompileOnce(const CompileJob& job, bool* waited) {
  return flights_.Do(
      FlightKey(job), [&] { return Run(job); },
      [&] { stats_->Add(Statistic::kSingleFlightWaiters); }, waited);
}

std::unique_ptr<Compiler> CompileFlights::AsCompiler() {
  return std::make_unique<FlightCompiler>(this, compiler_);
}

std::shared_ptr<const CompiledSet> CompileFlights::FindStored(const CompileJob& job) {
  auto set = std::make_shared<CompiledSet>();
  set->from_store = true;
  for (const ArtifactKey& key : ExpectedKeys(job, compiler_->toolkit().identity().id)) {
    absl::StatusOr<Artifact> found = tiers_->Get(0, key);
    if (!found.ok()) return nullptr;
    set->artifacts.push_back(std::make_shared<const Artifact>(*std::move(found)));
  }
  return set;
}

CompileResult CompileFlights::Run(const CompileJob& job) {
  if (std::shared_ptr<const CompiledSet> stored = FindStored(job)) return stored;

  Clock::time_point start = Clock::now();
  absl::StatusOr<CompileOutput> output = compiler_->Compile(job);
  stats_->Add(Statistic::kCompiles);
  // The wall time, less what the job waited for a free worker: compile time and queue wait
  // are separate figures (a 36 ms compile queued 209 s behind busy workers is 36 ms of it).
  int64_t wall =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  int64_t queued = output.ok() ? std::min(output->queued_micros, wall) : 0;
  stats_->Add(Statistic::kCompileMicros, wall - queued);
  stats_->Add(Statistic::kCompileQueueMicros, queued);
  stats_->RecordCompile(absl::Microseconds(wall - queued));
  if (!output.ok()) {
    stats_->Add(Statistic::kCompileErrors);
    if (absl::IsDeadlineExceeded(output.status()) || absl::IsResourceExhausted(output.status())) {
      stats_->Add(Statistic::kCompileLimitStops);
    }
    return output.status();
  }
  auto set = std::make_shared<CompiledSet>();
  for (Artifact& artifact : output->artifacts) {
    // A failing writable store is counted (and switched off) by the tiers; the compile still
    // serves this request and its waiters.
    tiers_->Put(0, artifact).IgnoreError();
    set->artifacts.push_back(std::make_shared<const Artifact>(std::move(artifact)));
  }
  memory_->InvalidateKernel(job.id);
  return set;
}

}  // namespace kcache
