#include "daemon/cache/compile_flights.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/compile/toolkit.h"

namespace kcache {
namespace {

using Clock = std::chrono::steady_clock;

// Identifies a flight: the kernel and the target (the artifacts it yields follow from them).
std::string FlightKey(const CompileJob& job) {
  return absl::StrCat(job.id.Bytes(), "/", job.target.ToString());
}

class FlightCompiler : public Compiler {
 public:
  FlightCompiler(CompileFlights* flights, Compiler* inner) : flights_(flights), inner_(inner) {}

  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) override {
    CompileJob warm_job = job;
    if (warm_job.demand.client.empty()) warm_job.demand.client = "(warm)";
    CompileResult result = flights_->CompileOnce(warm_job);
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

// How long a flight stays wanted after its last caller gave up: a client that gave up and
// asks again at once (a retry) finds its compile still queued, in its place, not dropped.
constexpr absl::Duration kRetryGrace = absl::Seconds(2);

class CompileFlights::Interest {
 public:
  // Where the flight is; shared by its callers and set by whoever runs it.
  const std::shared_ptr<CompileStatus>& status() const { return status_; }

  size_t Add(const CompileDemand& demand) {
    absl::MutexLock lock(&mu_);
    size_t ticket = next_ticket_++;
    wanted_.emplace_back(
        ticket, demand.wanted ? demand.wanted : [] { return true; });
    return ticket;
  }
  // True when no caller is left (the interest can go).
  bool Remove(size_t ticket) {
    absl::MutexLock lock(&mu_);
    wanted_.erase(std::remove_if(wanted_.begin(), wanted_.end(),
                                 [ticket](const auto& w) { return w.first == ticket; }),
                  wanted_.end());
    return wanted_.empty();
  }
  // True while a caller waits, and for kRetryGrace after the last one gave up.
  bool Wanted() {
    absl::MutexLock lock(&mu_);
    absl::Time now = absl::Now();
    if (std::any_of(wanted_.begin(), wanted_.end(), [](const auto& w) { return w.second(); })) {
      last_wanted_ = now;
      return true;
    }
    return now - last_wanted_ < kRetryGrace;
  }

 private:
  absl::Mutex mu_;
  absl::Time last_wanted_ ABSL_GUARDED_BY(mu_) = absl::Now();
  size_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<size_t, std::function<bool()>>> wanted_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<CompileStatus> status_ = std::make_shared<CompileStatus>();
};

std::shared_ptr<CompileFlights::Interest> CompileFlights::Register(const std::string& key,
                                                                   const CompileDemand& demand,
                                                                   size_t* ticket) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Interest>& interest = interests_[key];
  if (interest == nullptr) interest = std::make_shared<Interest>();
  *ticket = interest->Add(demand);
  return interest;
}

void CompileFlights::Unregister(const std::string& key, size_t ticket) {
  absl::MutexLock lock(&mu_);
  auto found = interests_.find(key);
  if (found != interests_.end() && found->second->Remove(ticket)) interests_.erase(found);
}

CompileResult CompileFlights::CompileOnce(const CompileJob& job, bool* waited,
                                          CompileWatch* watch) {
  const std::string key = FlightKey(job);
  if (std::optional<absl::Status> stopped = RecentLimitStop(key)) return *stopped;
  size_t ticket = 0;
  std::shared_ptr<Interest> interest = Register(key, job.demand, &ticket);
  CompileJob flight_job = job;
  flight_job.demand.wanted = [interest] { return interest->Wanted(); };
  flight_job.demand.status = interest->status();
  if (watch != nullptr) watch->Follow(interest->status());
  CompileResult result;
  // A flight dropped while this caller still waited (it joined as the others gave up) is run
  // again for it: a caller that wants the answer never gets "nobody waits".
  for (int attempt = 0; attempt < 3; ++attempt) {
    result = flights_.Do(
        key, [&] { return Run(flight_job); }, [&] { stats_->Add(Statistic::kSingleFlightWaiters); },
        waited);
    if (!absl::IsCancelled(result.status()) || (job.demand.wanted && !job.demand.wanted())) break;
  }
  Unregister(key, ticket);
  return result;
}

std::optional<absl::Status> CompileFlights::RecentLimitStop(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto found = limit_stops_.find(key);
  if (found == limit_stops_.end()) return std::nullopt;
  if (absl::Now() >= found->second.until) {
    limit_stops_.erase(found);
    return std::nullopt;
  }
  stats_->Add(Statistic::kCompileLimitSkips);
  const absl::Status& first = found->second.status;
  absl::Status again(
      first.code(),
      absl::StrCat(first.message(), "; not compiled again until ",
                   absl::FormatTime("%H:%M:%S UTC", found->second.until, absl::UTCTimeZone()),
                   " (a compile stopped by a limit is retried after ",
                   absl::FormatDuration(limit_backoff_), ")"));
  return again;
}

void CompileFlights::RememberLimitStop(const std::string& key, const absl::Status& status) {
  constexpr size_t kMaxLimitStops = 4096;
  if (limit_backoff_ <= absl::ZeroDuration()) return;
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (limit_stops_.size() >= kMaxLimitStops) {
    absl::erase_if(limit_stops_, [now](const auto& entry) { return entry.second.until <= now; });
  }
  if (limit_stops_.size() >= kMaxLimitStops) {
    auto oldest = std::min_element(
        limit_stops_.begin(), limit_stops_.end(),
        [](const auto& a, const auto& b) { return a.second.until < b.second.until; });
    limit_stops_.erase(oldest);
  }
  limit_stops_[key] = LimitStop{status, now + limit_backoff_};
}

std::unique_ptr<Compiler> CompileFlights::AsCompiler() {
  return std::make_unique<FlightCompiler>(this, compiler_);
}

std::shared_ptr<const CompiledSet> CompileFlights::FindStored(const CompileJob& job) {
  auto set = std::make_shared<CompiledSet>();
  set->from_store = true;
  for (const ArtifactKey& key : job.ExpectedKeys(compiler_->toolkit().identity().id)) {
    absl::StatusOr<Artifact> found = tiers_->Get(0, key);
    if (!found.ok()) return nullptr;
    set->artifacts.push_back(std::make_shared<const Artifact>(*std::move(found)));
  }
  return set;
}

absl::Duration CompileFlights::ExpectedCompileTime(const KernelId& id) {
  uint64_t longest = 0;
  for (size_t tier = 0; tier < tiers_->size(); ++tier) {
    absl::StatusOr<std::vector<ArtifactMeta>> metas = tiers_->ListArtifacts(tier, id);
    if (!metas.ok()) continue;
    for (const ArtifactMeta& meta : *metas) longest = std::max(longest, meta.compile_micros);
  }
  return absl::Microseconds(longest);
}

CompileResult CompileFlights::Run(const CompileJob& job) {
  if (std::shared_ptr<const CompiledSet> stored = FindStored(job)) return stored;
  job.demand.status->Expect(ExpectedCompileTime(job.id));
  std::string lease;  // the fleet's lease on this compile, when this daemon holds it
  if (shared_ != nullptr) job.demand.status->Shared();
  if (std::shared_ptr<const CompiledSet> fetched = FetchShared(job, &lease)) return fetched;

  Clock::time_point start = Clock::now();
  absl::StatusOr<CompileOutput> output = compiler_->Compile(job);
  if (absl::IsCancelled(output.status())) {  // left the queue: nobody waited any more
    stats_->Add(Statistic::kCompilesDropped);
    if (shared_ != nullptr) shared_->ReleaseLease(lease);
    return output.status();
  }
  stats_->Add(Statistic::kCompiles);
  // The wall time, less what the job waited for a free worker: compile time and queue wait
  // are separate figures (a 36 ms compile queued 209 s behind busy workers is 36 ms of it).
  int64_t wall =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  int64_t queued = output.ok() ? std::min(output->queued_micros, wall) : 0;
  stats_->Add(Statistic::kCompileMicros, wall - queued);
  stats_->Add(Statistic::kCompileQueueMicros, queued);
  if (output.ok()) stats_->Add(Statistic::kCompileCpuMicros, output->cpu_micros);
  stats_->RecordCompile(absl::Microseconds(wall - queued));
  if (!output.ok()) {
    stats_->Add(Statistic::kCompileErrors);
    if (absl::IsDeadlineExceeded(output.status()) || absl::IsResourceExhausted(output.status())) {
      stats_->Add(Statistic::kCompileLimitStops);
      RememberLimitStop(FlightKey(job), output.status());
    }
    if (shared_ != nullptr) shared_->ReleaseLease(lease);
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
  // Written by the tier's own thread, then the lease released.
  if (shared_ != nullptr) shared_->Publish(set->artifacts, lease);
  return set;
}

std::shared_ptr<const CompiledSet> CompileFlights::FetchShared(const CompileJob& job,
                                                               std::string* lease) {
  if (shared_ == nullptr) return nullptr;
  std::vector<ArtifactKey> keys = job.ExpectedKeys(compiler_->toolkit().identity().id);
  std::optional<std::vector<Artifact>> fetched = shared_->FetchAll(keys);
  if (!fetched) fetched = shared_->AwaitFleet(keys, lease);
  if (!fetched) return nullptr;
  auto set = std::make_shared<CompiledSet>();
  set->from_shared = true;
  for (Artifact& artifact : *fetched) {
    if (tiers_->Put(0, artifact).ok()) stats_->Add(Statistic::kWriteBacks);
    set->artifacts.push_back(std::make_shared<const Artifact>(std::move(artifact)));
  }
  memory_->InvalidateKernel(job.id);
  return set;
}

}  // namespace kcache
