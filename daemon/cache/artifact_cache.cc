// The artifact cache: memory LRU -> writable store -> baked stores -> compile, by the serving
// rules of engine/resolve/decide.h, with single-flight compiles (compile_flights.h), tier
// health (store_tiers.h), statistics (statistics.h) and the record of what was asked for.
#include "daemon/cache/artifact_cache.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/kernel_spec.h"
#include "daemon/cache/background_compiles.h"
#include "daemon/cache/compile_flights.h"
#include "daemon/cache/memory_lru.h"
#include "daemon/cache/ptx_builds.h"
#include "daemon/cache/seen_kernels.h"
#include "daemon/cache/shared_tier.h"
#include "daemon/cache/startup_warm.h"
#include "daemon/cache/statistics.h"
#include "daemon/cache/store_tiers.h"
#include "daemon/cache/unknown_driver.h"
#include "daemon/cache/write_behind.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/fatbin/library_plan.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/resolve/decide.h"
#include "engine/store/store.h"
#include "spdlog/spdlog.h"

namespace kcache {

// What Find decided for a resolve that needs a compile, for Compile to run.
struct PendingCompile::State {
  ResolveDecision decision;  // kCompile, with its job's demand set
  Device device;
  uint64_t epoch = 0;  // the memory tier's, when the decision was read
  std::function<void()> waits_for_compile;
  CompileWatch* compile_watch = nullptr;
  ResolveTally tally;  // what the lookup counted, committed with the compile's answer
  absl::Time start;
};

PendingCompile::PendingCompile(std::unique_ptr<State> state) : state_(std::move(state)) {}
PendingCompile::PendingCompile(PendingCompile&&) noexcept = default;
PendingCompile& PendingCompile::operator=(PendingCompile&&) noexcept = default;
PendingCompile::~PendingCompile() = default;

absl::StatusOr<Served> ArtifactCache::Resolve(const ResolveQuery& query) {
  Found found = Find(query);
  if (auto* pending = std::get_if<PendingCompile>(&found)) return Compile(std::move(*pending));
  return std::get<absl::StatusOr<Served>>(std::move(found));
}

namespace {

// Ids known to have a record in some store; past this many the set starts over.
constexpr size_t kMaxRegisteredIds = 100000;

// The miss of a kernel a client sent, where the compile workers cannot be sandboxed.
absl::Status UnsandboxedRefusal() {
  return WithMissReason(
      absl::NotFoundError(
          "this kcached compiles only the image's own kernels: its compile workers cannot be "
          "sandboxed on this machine (no Landlock or seccomp; see its start-up log or `kcache "
          "doctor`), so a source a client sends could read the machine's files; compile it in "
          "the worker, bake it into the image with `kcache warm --store`, or start kcached "
          "with --allow-unsandboxed-compiles to accept the risk"),
      MissReason::kCompileNotAllowed);
}

// The one check the cache makes of a query: its shape. What a query holds was checked once, at
// the edge that made it (CheckedQueryFromProto, daemon/service/wire_convert.h).
absl::Status CheckQuery(const ResolveQuery& query) {
  int given = int{query.record != nullptr} + int{query.id.has_value()} + int{!query.name.empty()};
  if (given != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a resolve names its kernel by exactly one of spec, id or name; this one gave ", given));
  }
  return absl::OkStatus();
}

class ArtifactCacheImpl : public ArtifactCache {
 public:
  explicit ArtifactCacheImpl(CacheOptions options)
      : local_(std::move(options.local)),
        baked_(std::move(options.baked)),
        compilers_(std::move(options.compilers)),
        compile_allowed_(options.compile_allowed),
        compile_client_sources_(options.compile_client_sources),
        stats_owner_(options.statistics != nullptr ? std::move(options.statistics)
                                                   : std::make_shared<Statistics>()),
        stats_(*stats_owner_),
        memory_(options.memory_bytes) {
    std::vector<Store*> baked;
    for (const std::unique_ptr<Store>& store : baked_) baked.push_back(store.get());
    tiers_ = std::make_unique<HealthCheckedTiers>(local_.get(), baked, options.tier_off_initial,
                                                  options.tier_off_max, &stats_);
    if (options.shared) {  // its URL was checked by NewArtifactCache: Create cannot fail
      shared_ = *SharedTier::Create(*std::move(options.shared), &stats_);
    }
    for (const std::shared_ptr<Compiler>& compiler : compilers_) {
      toolkits_.push_back(&compiler->toolkit());
      flights_.push_back(std::make_unique<CompileFlights>(compiler.get(), tiers_.get(), &memory_,
                                                          &stats_, options.compile_limit_backoff,
                                                          shared_.get()));
    }
    write_behind_ = std::make_unique<WriteBehind>(
        options.write_back_queue_bytes,
        [this](const Artifact& artifact) {
          // The baked store keeps it: an unsynced copy, no disk flush.
          if (tiers_->PutCopy(0, artifact).ok()) stats_.Add(Statistic::kWriteBacks);
        },
        [this] { stats_.Add(Statistic::kWriteBacksDropped); });
    std::vector<CompileFlights*> flights;
    for (const std::unique_ptr<CompileFlights>& flight : flights_) flights.push_back(flight.get());
    ptx_builds_ = std::make_unique<PtxBuilds>(
        PtxBuilds::Options{options.ptx_build_queue, options.ptx_build_queue_per_client,
                           compile_allowed_, compile_client_sources_},
        tiers_.get(), toolkits_, std::move(flights), &stats_);
    if (!compilers_.empty()) {
      background_ = std::make_unique<BackgroundCompiles>(
          options.background_queue,
          [this](const CompileJob& job, size_t toolkit) {
            // Stored and the kernel's memory entries dropped by the flight; errors are counted
            // there.
            flights_[toolkit]->CompileOnce(job).IgnoreError();
          },
          &stats_);
    }
  }

  Found Find(const ResolveQuery& query) override;
  absl::StatusOr<Served> Compile(PendingCompile pending) override;
  Peeked Peek(ResolveQuery query) override;
  void CommitPeek(const Peeked& peeked) override;
  absl::StatusOr<WarmSummary> Warm(const Manifest& manifest, const WarmOptions& options,
                                   WarmObserver* observer) override;
  StartupWarmResult WarmAfterStart(uint64_t budget_bytes,
                                   const std::function<void(std::shared_ptr<const Artifact>)>& each,
                                   const std::function<bool()>& keep_going) override {
    uint64_t remembered = 0;
    auto remember_then_each = [&](std::shared_ptr<const Artifact> artifact) {
      remembered += RememberForUnknownDriver(artifact);
      if (each) each(std::move(artifact));
    };
    StartupWarmResult result =
        WarmFromStores(*tiers_, budget_bytes, remember_then_each, keep_going);
    result.memory_entries = remembered;
    stats_.Add(Statistic::kStartupWarmedBytes, result.bytes);
    return result;
  }
  absl::StatusOr<PtxBuildQueued> BuildFromPtx(const PtxBuildRequest& request) override;
  absl::StatusOr<std::vector<ListedKernelInfo>> List() override;
  std::vector<SeenKernel> Seen() const override;
  CacheSnapshot Snapshot() const override;

 private:
  // Find without its counts: they go into `tally`, for the caller to commit.
  Found Lookup(const ResolveQuery& query, ResolveTally& tally);
  absl::StatusOr<KernelId> Identify(const ResolveQuery& query, ResolveTally& tally);
  // A memory miss for a known driver: the entry for driver 0 carried over (CarryToDriver),
  // remembered under the device's own key.
  std::optional<Answer> FromUnknownDriver(const KernelId& id, const Device& device);
  // The start-up warm's read of a cubin: what a store hit would serve its SM with an unknown
  // driver, remembered in memory (and the kernel counted as registered). Whether it was.
  bool RememberForUnknownDriver(const std::shared_ptr<const Artifact>& read);
  void RegisterIfNew(const KernelId& id, const KernelRecord& record);
  absl::StatusOr<KernelId> FindByName(const std::string& name, ResolveTally& tally);
  Found ResolveMiss(const KernelId& id, const ResolveQuery& query, ResolveTally& tally);
  Served ServeStored(const KernelId& id, const Device& device, Answer hit, size_t tier,
                     bool remember, uint64_t epoch, ResolveTally& tally);
  absl::StatusOr<Served> CompileMiss(ResolveDecision decision, const Device& device, uint64_t epoch,
                                     CompileWatch* watch, ResolveTally& tally);
  // Whether a compile of `id` may run: always with sandboxed workers; else only for a kernel
  // whose record a baked store holds (its source came with the image, not from a client).
  bool MayCompile(const KernelId& id);
  // The index of the newest loaded toolkit (warms compile with it); compilers_ is not empty.
  size_t Newest() const;
  Served Serve(Answer answer, CacheTier tier, ResolveTally& tally);
  absl::Status Miss(absl::Status status, ResolveTally& tally);
  // Counts a resolve's tally, the request, and its latency since `start`.
  void Commit(const ResolveTally& tally, const absl::StatusOr<Served>& served, absl::Time start);
  void RecordSeen(const KernelId& id, const ResolveQuery& query, const KernelRecord* record);

  std::unique_ptr<Store> local_;
  std::vector<std::unique_ptr<Store>> baked_;
  std::vector<std::shared_ptr<Compiler>> compilers_;
  std::vector<const Toolkit*> toolkits_;  // compilers_[i]->toolkit()
  const bool compile_allowed_;
  const bool compile_client_sources_;
  const std::shared_ptr<Statistics> stats_owner_;  // CacheOptions::statistics, or its own
  Statistics& stats_;
  MemoryLru memory_;
  std::unique_ptr<HealthCheckedTiers> tiers_;
  std::unique_ptr<SharedTier> shared_;  // null: none; outlives flights_, which borrow it
  std::vector<std::unique_ptr<CompileFlights>> flights_;  // one per compiler
  SeenKernels seen_;
  // Baked-store hits copied into the writable store; declared after the stores and tiers it
  // writes to, so it is drained and stopped before they go.
  std::unique_ptr<WriteBehind> write_behind_;

  absl::Mutex mu_;
  absl::flat_hash_set<std::string> registered_ ABSL_GUARDED_BY(mu_);  // raw kernel ids
  // Compiles of ptx_now resolves, through the flights (a foreground miss for the same artifact
  // joins them); null without a compiler. Declared last: stopped first, before anything its
  // compiles use.
  std::unique_ptr<BackgroundCompiles> background_;
  // SASS builds from PTX that loads sent (BuildFromPtx), likewise stopped first.
  std::unique_ptr<PtxBuilds> ptx_builds_;
};

ArtifactCache::Found ArtifactCacheImpl::Find(const ResolveQuery& query) {
  absl::Time start = absl::Now();
  ResolveTally tally;
  Found found = Lookup(query, tally);
  if (auto* pending = std::get_if<PendingCompile>(&found)) {
    pending->state().tally = std::move(tally);
    pending->state().start = start;
    return found;
  }
  Commit(tally, std::get<absl::StatusOr<Served>>(found), start);
  return found;
}

absl::StatusOr<Served> ArtifactCacheImpl::Compile(PendingCompile pending) {
  PendingCompile::State& state = pending.state();
  if (state.waits_for_compile) state.waits_for_compile();
  absl::StatusOr<Served> served = CompileMiss(std::move(state.decision), state.device, state.epoch,
                                              state.compile_watch, state.tally);
  Commit(state.tally, served, state.start);
  return served;
}

ArtifactCache::Peeked ArtifactCacheImpl::Peek(ResolveQuery query) {
  Peeked peeked;
  peeked.start = absl::Now();
  query.allow_compile = false;  // so the lookup never leaves a compile pending
  Found found = Lookup(query, peeked.tally);
  if (std::holds_alternative<PendingCompile>(found)) {
    peeked.served = absl::InternalError("a lookup that may not compile decided to compile");
  } else {
    peeked.served = std::get<absl::StatusOr<Served>>(std::move(found));
  }
  return peeked;
}

void ArtifactCacheImpl::CommitPeek(const Peeked& peeked) {
  Commit(peeked.tally, peeked.served, peeked.start);
}

void ArtifactCacheImpl::Commit(const ResolveTally& tally, const absl::StatusOr<Served>& served,
                               absl::Time start) {
  for (const auto& [statistic, n] : tally.adds) stats_.Add(statistic, n);
  stats_.Add(Statistic::kResolveRequests);
  ResolveOutcome outcome = served.ok()                                ? OutcomeOf(served->tier)
                           : absl::IsNotFound(served.status())        ? ResolveOutcome::kMiss
                           : absl::IsInvalidArgument(served.status()) ? ResolveOutcome::kInvalid
                                                                      : ResolveOutcome::kError;
  stats_.RecordResolve(outcome, absl::Now() - start);
}

ArtifactCache::Found ArtifactCacheImpl::Lookup(const ResolveQuery& query, ResolveTally& tally) {
  absl::StatusOr<KernelId> id = Identify(query, tally);
  if (!id.ok()) return id.status();
  std::optional<Answer> hit = memory_.Lookup(MemoryKey{*id, query.device.sm, query.device.driver});
  if (!hit) hit = FromUnknownDriver(*id, query.device);
  if (!hit) return ResolveMiss(*id, query, tally);
  local_->RecordUse(hit->artifact->meta.key);  // kept from eviction while memory serves it
  RecordSeen(*id, query, query.record.get());
  return Serve(*std::move(hit), CacheTier::kMemory, tally);
}

absl::StatusOr<KernelId> ArtifactCacheImpl::Identify(const ResolveQuery& query,
                                                     ResolveTally& tally) {
  if (absl::Status s = CheckQuery(query); !s.ok()) {
    tally.Add(Statistic::kInvalidRequests);
    return s;
  }
  if (query.id) return *query.id;
  if (!query.name.empty()) return FindByName(query.name, tally);
  RegisterIfNew(query.record->id,
                *query.record);  // the id the edge computed (ResolveQuery::record)
  return query.record->id;
}

std::optional<Answer> ArtifactCacheImpl::FromUnknownDriver(const KernelId& id,
                                                           const Device& device) {
  if (device.driver == 0) return std::nullopt;
  uint64_t epoch = memory_.epoch();
  std::optional<Answer> unknown = memory_.Lookup(MemoryKey{id, device.sm, 0});
  if (!unknown) return std::nullopt;
  std::optional<Answer> carried = CarryToDriver(*unknown, device);
  if (carried) memory_.InsertIfCurrent(MemoryKey{id, device.sm, device.driver}, *carried, epoch);
  return carried;
}

bool ArtifactCacheImpl::RememberForUnknownDriver(const std::shared_ptr<const Artifact>& read) {
  const ArtifactKey& key = read->meta.key;
  if (key.kind != ArtifactKind::kCubin || key.target.kind != TargetKind::kSass) return false;
  Device device{key.target.sm, 0};
  uint64_t epoch = memory_.epoch();
  absl::StatusOr<ResolveDecision> decision =
      DecideResolve(*tiers_, key.kernel_id, nullptr, device,
                    ResolvePolicy{.allow_compile = false, .held = read}, toolkits_);
  if (!decision.ok() || !decision->record) return false;
  {
    absl::MutexLock lock(&mu_);  // known to a store: a request need not look for its record
    if (registered_.size() < kMaxRegisteredIds)
      registered_.insert(std::string(key.kernel_id.Bytes()));
  }
  if (decision->action != ResolveDecision::Action::kServe || !decision->stored ||
      decision->stored->needs_jit()) {
    return false;
  }
  // The answer serves what was read (ResolvePolicy::held), not a second copy of its bytes.
  return memory_.InsertIfCurrent(MemoryKey{key.kernel_id, device.sm, 0},
                                 *std::move(decision->stored), epoch);
}

void ArtifactCacheImpl::RegisterIfNew(const KernelId& id, const KernelRecord& record) {
  std::string raw(id.Bytes());
  {
    absl::MutexLock lock(&mu_);
    if (registered_.contains(raw)) return;
  }
  bool known = false;
  for (size_t t = 0; t < tiers_->size() && !known; ++t) known = tiers_->GetKernel(t, id).ok();
  if (!known) {
    KernelRecord copy = record;
    copy.id = id;
    copy.registered_unix_ms = NowUnixMillis();
    known = tiers_->PutKernel(0, copy).ok();
    if (known) stats_.Add(Statistic::kKernelsRegistered);
  }
  if (!known) return;  // the writable store is failing: try again on a later request
  absl::MutexLock lock(&mu_);
  if (registered_.size() >= kMaxRegisteredIds) registered_.clear();
  registered_.insert(std::move(raw));
}

absl::StatusOr<KernelId> ArtifactCacheImpl::FindByName(const std::string& name,
                                                       ResolveTally& tally) {
  std::optional<KernelRecord> best;
  absl::Status first_error;
  for (size_t t = 0; t < tiers_->size(); ++t) {
    if (!tiers_->available(t)) continue;
    absl::StatusOr<KernelRecord> found = FindKernel(tiers_->store(t), name);
    if (found.ok()) {
      if (!best || found->registered_unix_ms > best->registered_unix_ms) best = *found;
    } else if (first_error.ok() || absl::IsNotFound(first_error)) {
      first_error = found.status();
    }
  }
  if (best) return best->id;
  if (first_error.ok() || absl::IsNotFound(first_error)) {
    return Miss(WithMissReason(absl::NotFoundError(absl::StrCat(
                                   "no store knows a kernel named (or with id) '", name,
                                   "'; `kcache ls` lists what the daemon holds")),
                               MissReason::kUnknownKernel),
                tally);
  }
  if (absl::IsInvalidArgument(first_error)) {  // an ambiguous id prefix
    tally.Add(Statistic::kInvalidRequests);
    return first_error;
  }
  return Miss(WithMissReason(first_error, MissReason::kNothingServable), tally);  // failing store
}

ArtifactCache::Found ArtifactCacheImpl::ResolveMiss(const KernelId& id, const ResolveQuery& query,
                                                    ResolveTally& tally) {
  const Device& device = query.device;
  uint64_t epoch = memory_.epoch();
  const KernelRecord* sent = query.record.get();  // used when no store has the record
  ResolvePolicy policy{.allow_compile = query.allow_compile && compile_allowed_,
                       .ptx_now = query.ptx_now};
  absl::StatusOr<ResolveDecision> decision =
      DecideResolve(*tiers_, id, sent, device, policy, toolkits_);
  RecordSeen(id, query, decision.ok() && decision->record ? &*decision->record : sent);
  if (!decision.ok()) return Miss(decision.status(), tally);
  if (decision->action != ResolveDecision::Action::kServe && !MayCompile(id)) {
    if (!decision->stored) return Miss(UnsandboxedRefusal(), tally);
    decision->action = ResolveDecision::Action::kServe;  // the stored PTX, not compiled further
  }
  switch (decision->action) {
    case ResolveDecision::Action::kServe: {
      // PTX is remembered only when nothing here can ever compile: another request (one
      // that allows compiling) must still get the SASS built.
      bool remember = !decision->stored->needs_jit() || compilers_.empty() || !compile_allowed_;
      return ServeStored(id, device, *std::move(decision->stored), decision->stored_tier, remember,
                         epoch, tally);
    }
    case ResolveDecision::Action::kServeAndCompile:
      background_->Add(*decision->compile, decision->toolkit);
      // Not remembered in memory: the SASS compiled in the background replaces it.
      return ServeStored(id, device, *std::move(decision->stored), decision->stored_tier,
                         /*remember=*/false, epoch, tally);
    case ResolveDecision::Action::kCompile:
      break;
  }
  decision->compile->demand = CompileDemand{query.client, query.still_wanted, nullptr};
  auto pending = std::make_unique<PendingCompile::State>();
  pending->decision = *std::move(decision);
  pending->device = device;
  pending->epoch = epoch;
  pending->waits_for_compile = query.waits_for_compile;
  pending->compile_watch = query.compile_watch;
  return PendingCompile(std::move(pending));
}

Served ArtifactCacheImpl::ServeStored(const KernelId& id, const Device& device, Answer hit,
                                      size_t tier, bool remember, uint64_t epoch,
                                      ResolveTally& tally) {
  if (tier > 0) write_behind_->Add(hit.artifact);  // copied into the writable store, not now
  if (remember) memory_.InsertIfCurrent(MemoryKey{id, device.sm, device.driver}, hit, epoch);
  return Serve(std::move(hit), tiers_->kind(tier), tally);
}

absl::StatusOr<Served> ArtifactCacheImpl::CompileMiss(ResolveDecision decision,
                                                      const Device& device, uint64_t epoch,
                                                      CompileWatch* watch, ResolveTally& tally) {
  const CompileJob& job = *decision.compile;
  CompileResult result = flights_[decision.toolkit]->CompileOnce(job, nullptr, watch);
  if (!result.ok()) {
    absl::Status miss = MissAfterFailedCompile(decision, result.status());
    if (!miss.ok()) return Miss(std::move(miss), tally);
    return ServeStored(job.id, device, *std::move(decision.stored), decision.stored_tier,
                       /*remember=*/false, epoch, tally);
  }
  std::shared_ptr<const Artifact> artifact = (*result)->Find(ServedKindOf(job), job.target);
  if (artifact == nullptr) {
    return Miss(CompiledNothingServable(job), tally);
  }
  // Later requests for this device are served it from memory: a cubin as an exact match.
  ServeRule rule = CompiledRule(job);
  ServeRule remembered = rule == ServeRule::kCompiled ? ServeRule::kExactSass : rule;
  Answer remembered_answer{artifact, remembered,
                           remembered == rule ? CompiledReason(job, artifact->meta, device)
                                              : ServeReason(remembered, artifact->meta, device)};
  memory_.Insert(MemoryKey{job.id, device.sm, device.driver}, remembered_answer);
  if ((*result)->from_store) {  // an earlier flight stored it between our lookup and now
    return Serve(std::move(remembered_answer), CacheTier::kLocalStore, tally);
  }
  if ((*result)->from_shared) {  // another daemon of the fleet compiled it
    return Serve(std::move(remembered_answer), CacheTier::kShared, tally);
  }
  std::string reason = CompiledReason(job, artifact->meta, device);
  return Serve(Answer{std::move(artifact), rule, std::move(reason)}, CacheTier::kCompile, tally);
}

bool ArtifactCacheImpl::MayCompile(const KernelId& id) {
  if (compile_client_sources_) return true;
  for (size_t tier = 0; tier < tiers_->size(); ++tier) {
    if (tiers_->kind(tier) == CacheTier::kBakedStore && tiers_->GetKernel(tier, id).ok()) {
      return true;
    }
  }
  return false;
}

size_t ArtifactCacheImpl::Newest() const {
  size_t best = 0;
  for (size_t i = 1; i < toolkits_.size(); ++i) {
    if (toolkits_[i]->identity().NewerThan(toolkits_[best]->identity())) best = i;
  }
  return best;
}

Served ArtifactCacheImpl::Serve(Answer answer, CacheTier tier, ResolveTally& tally) {
  tally.Add(HitStatistic(tier));
  tally.Add(RuleStatistic(answer.rule));
  tally.Add(Statistic::kBytesServed, answer.artifact->bytes.size());
  if (tier != CacheTier::kCompile) {
    tally.Add(Statistic::kCompileMicrosSaved, answer.artifact->meta.compile_micros);
  }
  return Served{std::move(answer), tier};
}

absl::Status ArtifactCacheImpl::Miss(absl::Status status, ResolveTally& tally) {
  std::optional<MissReason> reason = MissReasonOf(status);
  tally.Add(MissStatistic(reason.value_or(MissReason::kNothingServable)));
  return status;
}

void ArtifactCacheImpl::RecordSeen(const KernelId& id, const ResolveQuery& query,
                                   const KernelRecord* record) {
  if (!seen_.Record(id, query.device.sm, record)) stats_.Add(Statistic::kSeenDropped);
}

absl::StatusOr<WarmSummary> ArtifactCacheImpl::Warm(const Manifest& manifest,
                                                    const WarmOptions& options,
                                                    WarmObserver* observer) {
  stats_.Add(Statistic::kWarmRuns);
  if (!compile_client_sources_) {
    return absl::FailedPreconditionError(
        "this kcached compiles no manifest that clients send: its compile workers cannot be "
        "sandboxed on this machine (no Landlock or seccomp; see its start-up log or `kcache "
        "doctor`); warm into the image's store with `kcache warm --store`, or start kcached "
        "with --allow-unsandboxed-compiles to accept the risk");
  }
  if (compilers_.empty()) {
    return absl::FailedPreconditionError(
        "no toolkit is loaded, so this daemon cannot compile; start kcached with --toolkit "
        "(or CUDA_HOME), or warm into a store directory with `kcache warm --store`");
  }
  if (options.targets.empty()) {
    return absl::InvalidArgumentError("warm needs at least one target, e.g. --arch 8.9");
  }
  size_t newest = Newest();
  const Toolkit& toolkit = *toolkits_[newest];
  for (const Target& target : options.targets) {
    if (absl::Status s =
            ValidateTarget(target, toolkit.supported_archs(), toolkit.identity().DisplayName());
        !s.ok()) {
      return s;
    }
  }
  std::unique_ptr<Compiler> through_flights = flights_[newest]->AsCompiler();
  return kcache::Warm(manifest, options, *local_, *through_flights, observer);
}

absl::StatusOr<PtxBuildQueued> ArtifactCacheImpl::BuildFromPtx(const PtxBuildRequest& request) {
  return ptx_builds_->Build(request);
}

absl::StatusOr<std::vector<ListedKernelInfo>> ArtifactCacheImpl::List() {
  return ListTiers(*tiers_);
}

std::vector<SeenKernel> ArtifactCacheImpl::Seen() const {
  std::vector<SeenKernel> out;
  for (SeenEntry& entry : seen_.Entries()) {
    std::optional<KernelRecord> record = std::move(entry.record);
    for (size_t t = 0; t < tiers_->size() && !record; ++t) {
      absl::StatusOr<KernelRecord> found = tiers_->GetKernel(t, entry.id);
      if (found.ok()) record = *std::move(found);
    }
    if (!record) continue;  // nobody sent or stored its spec: nothing to export
    record->id = entry.id;
    out.push_back(SeenKernel{*std::move(record), std::move(entry.devices), entry.requests});
  }
  std::sort(out.begin(), out.end(), [](const SeenKernel& a, const SeenKernel& b) {
    if (a.requests != b.requests) return a.requests > b.requests;
    return a.record.spec.name < b.record.spec.name;
  });
  return out;
}

CacheSnapshot ArtifactCacheImpl::Snapshot() const {
  CacheSnapshot snapshot;
  snapshot.counters = stats_.Values();
  snapshot.histograms = stats_.Histograms();
  auto set = [&](Statistic s, uint64_t value) {
    snapshot.counters[static_cast<size_t>(s) - 1].value = value;
  };
  MemoryLruStats memory = memory_.Stats();
  snapshot.memory_bytes = memory.bytes;
  snapshot.memory_entries = memory.entries;
  set(Statistic::kMemoryEvictions, memory.evictions);
  set(Statistic::kMemoryInvalidations, memory.invalidations);
  TiersSnapshot stores = tiers_->Snapshot();
  snapshot.stores = std::move(stores.stores);
  set(Statistic::kChecksumFailures, stores.checksum_failures);
  set(Statistic::kStoreEvictions, stores.writable.evictions);
  set(Statistic::kStoreEvictedBytes, stores.writable.evicted_bytes);
  set(Statistic::kStoreWritesRefusedFull, stores.writable.writes_refused_full);
  set(Statistic::kStoreReplacedDamaged, stores.writable.replaced_damaged ? 1 : 0);
  for (const Toolkit* toolkit : toolkits_) snapshot.toolkits.push_back(toolkit->identity().id);
  return snapshot;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArtifactCache>> NewArtifactCache(CacheOptions options) {
  if (options.local == nullptr) {
    return absl::InvalidArgumentError(
        "the artifact cache needs a writable store (CacheOptions::local); open one with "
        "OpenStore(--store)");
  }
  for (const std::unique_ptr<Store>& store : options.baked) {
    if (store == nullptr) {
      return absl::InvalidArgumentError("a baked store given to the artifact cache is null");
    }
  }
  if (options.tier_off_initial <= absl::ZeroDuration() ||
      options.tier_off_max < options.tier_off_initial) {
    return absl::InvalidArgumentError(
        "tier_off_initial must be positive and tier_off_max at least as long");
  }
  if (options.shared) {
    if (absl::Status url = ParseRedisUrl(options.shared->url).status(); !url.ok()) return url;
  }
  return std::unique_ptr<ArtifactCache>(new ArtifactCacheImpl(std::move(options)));
}

}  // namespace kcache
