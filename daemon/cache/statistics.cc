#include "daemon/cache/statistics.h"

#include <algorithm>
#include <string>

namespace kcache {

using S = Statistic;

namespace {

// objects.uncached_<reason> and its help, for each UncachedReason after kNone: written here at
// compile time from UncachedReasonName, the one place reasons are named.
constexpr absl::string_view kUncachedName = "objects.uncached_";
constexpr absl::string_view kUncachedHelp = "launcher commands run uncached: ";
constexpr absl::string_view kUncachedHelpEnd = " (docs/torch-extensions.md)";

// Where the texts of `reason` start in kUncachedText (each reason's name, then its help).
constexpr size_t UncachedTextStart(int reason) {
  size_t start = 0;
  for (int r = 1; r < reason; ++r) {
    start += kUncachedName.size() + kUncachedHelp.size() + kUncachedHelpEnd.size() +
             2 * UncachedReasonName(static_cast<UncachedReason>(r)).size();
  }
  return start;
}

constexpr std::array<char, UncachedTextStart(kUncachedReasonCount)> kUncachedText = [] {
  std::array<char, UncachedTextStart(kUncachedReasonCount)> text{};
  char* out = text.data();
  for (int r = 1; r < kUncachedReasonCount; ++r) {
    absl::string_view name = UncachedReasonName(static_cast<UncachedReason>(r));
    for (absl::string_view part : {kUncachedName, name, kUncachedHelp, name, kUncachedHelpEnd}) {
      out = std::copy(part.begin(), part.end(), out);
    }
  }
  return text;
}();

constexpr StatisticInfo Uncached(UncachedReason reason) {
  absl::string_view name = UncachedReasonName(reason);
  const char* start = kUncachedText.data() + UncachedTextStart(static_cast<int>(reason));
  size_t name_size = kUncachedName.size() + name.size();
  size_t help_size = kUncachedHelp.size() + name.size() + kUncachedHelpEnd.size();
  return {UncachedStatistic(reason), {start, name_size}, {start + name_size, help_size}};
}

constexpr StatisticInfo kRows[] = {
    {S::kResolveRequests, "resolve.requests", "Resolve calls received, valid or not"},
    {S::kHitMemory, "resolve.hit.memory", "resolves served from the memory LRU"},
    {S::kHitLocalStore, "resolve.hit.local_store", "resolves served from the writable store"},
    {S::kHitBakedStore, "resolve.hit.baked_store",
     "resolves served from a read-only baked store (then written back above it)"},
    {S::kHitCompile, "resolve.hit.compile",
     "resolves served by compiling on the miss (the compiling request and its waiters)"},
    {S::kRuleExactSass, "resolve.rule.exact_sass",
     "resolves answered with a cubin for the device's SM"},
    {S::kRuleCompatibleSass, "resolve.rule.compatible_sass",
     "resolves answered with a cubin of the same major and a lower minor"},
    {S::kRulePtxJit, "resolve.rule.ptx_jit", "resolves answered with PTX the driver must JIT"},
    {S::kRuleCompiled, "resolve.rule.compiled", "resolves answered with a cubin compiled for them"},
    {S::kMissUnknownKernel, "miss.unknown_kernel",
     "misses: no store knows the kernel's spec and nothing stored fits"},
    {S::kMissBelowMinArch, "miss.below_min_arch", "refusals: device below the kernel's min_arch"},
    {S::kMissAboveMaxArch, "miss.above_max_arch", "refusals: device above the kernel's max_arch"},
    {S::kMissNoToolkit, "miss.no_toolkit", "misses that could not compile: no toolkit loaded"},
    {S::kMissCompileNotAllowed, "miss.compile_not_allowed",
     "misses that could not compile: the request did not allow it"},
    {S::kMissCompileError, "miss.compile_error", "misses whose compile failed (NVRTC error)"},
    {S::kMissNothingServable, "miss.nothing_servable",
     "misses for any other cause: compile limits or unsupported target, every tier failing"},
    {S::kInvalidRequests, "resolve.invalid",
     "Resolve calls refused as malformed (INVALID_ARGUMENT)"},
    {S::kCompiles, "compile.runs", "compiles run (misses and warms; once per single-flight)"},
    {S::kCompileErrors, "compile.errors", "compiles that failed"},
    {S::kCompileMicros, "compile.micros",
     "wall time spent compiling, microseconds (without the wait for a worker)"},
    {S::kCompileMicrosSaved, "compile.micros_saved",
     "compile time of the artifacts served from memory or a store, microseconds"},
    {S::kSingleFlightWaiters, "compile.single_flight_waiters",
     "requests (or warm jobs) that waited for a compile another one started"},
    {S::kBytesServed, "resolve.bytes_served", "payload bytes of the artifacts served"},
    {S::kChecksumFailures, "store.checksum_failures",
     "corrupt entries the stores found since open (each a miss, dropped and rebuilt)"},
    {S::kTierFailures, "tier.failures", "store calls that failed (an error other than not found)"},
    {S::kTiersSwitchedOff, "tier.switched_off", "times a failing tier was switched off"},
    {S::kTierSkips, "tier.skips", "store calls skipped because their tier was switched off"},
    {S::kMemoryEvictions, "memory.evictions", "memory entries evicted to stay within the bound"},
    {S::kMemoryInvalidations, "memory.invalidations",
     "memory entries dropped because a new artifact of their kernel was stored"},
    {S::kWriteBacks, "tier.write_backs", "baked-store hits copied into the writable store"},
    {S::kKernelsRegistered, "kernels.registered",
     "kernel specs received in requests and registered in the writable store"},
    {S::kSeenDropped, "seen.dropped",
     "requests not recorded for export-manifest because the table of seen kernels was full"},
    {S::kWarmRuns, "warm.runs", "Warm calls run"},
    {S::kMissDriverTooOld, "miss.driver_too_old",
     "misses whose device driver loads neither what is stored nor what a loaded toolkit builds"},
    {S::kBackgroundCompilesQueued, "compile.background_queued",
     "SASS compiles queued behind a PTX answer taken now (ptx_now)"},
    {S::kBackgroundCompilesDropped, "compile.background_dropped",
     "SASS compiles not queued behind a PTX answer: the background queue was full"},
    {S::kCompileQueueMicros, "compile.queue_micros",
     "time compiles waited for a free compile worker, microseconds (not in compile.micros)"},
    {S::kCompileLimitStops, "compile.limit_stops",
     "compiles stopped by a limit: wall-clock time, CPU time or memory (each also logged)"},
    {S::kCallsRefusedBusy, "calls.refused_busy",
     "calls refused RESOURCE_EXHAUSTED: --max-calls-in-flight calls were in flight already"},
    {S::kResolveRefusedQueuedBytes, "resolve.refused_queued_bytes",
     "Resolve calls refused RESOURCE_EXHAUSTED: --queued-max-bytes of payload was queued for "
     "clients that read slowly"},
    {S::kStoreEvictions, "store.evictions",
     "least recently used entries evicted from the writable store to stay within its bound"},
    {S::kStoreEvictedBytes, "store.evicted_bytes", "bytes of the entries evicted"},
    {S::kStoreWritesRefusedFull, "store.writes_refused_full",
     "writes to the writable store refused because its disk was full (reads go on)"},
    {S::kStoreReplacedDamaged, "store.replaced_damaged",
     "writable stores that could not open, moved aside and replaced at start (0 or 1)"},
    {S::kCompilesDropped, "compile.dropped",
     "compiles that left the queue without running: every caller had given up"},
    {S::kCompileLimitSkips, "compile.limit_skips",
     "compiles not run because the same kernel and target was stopped by a limit lately"},
    {S::kHitShared, "resolve.hit.shared",
     "resolves served from the shared tier (then written back to the writable store)"},
    {S::kSharedHits, "shared.hits", "artifacts fetched from the shared tier and verified"},
    {S::kSharedMisses, "shared.misses", "shared-tier lookups that found no entry"},
    {S::kSharedErrors, "shared.errors",
     "shared-tier calls that failed or ran past the budget (the request went on without it)"},
    {S::kSharedRejected, "shared.rejected",
     "shared-tier entries that failed verification (MAC, framing, checksum): never served"},
    {S::kSharedWrites, "shared.writes", "artifacts written to the shared tier"},
    {S::kSharedSkips, "shared.skips",
     "shared-tier lookups and writes skipped while the tier is switched off after failures"},
    {S::kSharedTooBig, "shared.too_big",
     "artifacts kept out of the shared tier: larger than --shared-max-bytes"},
    {S::kSharedWritesDropped, "shared.writes_dropped",
     "shared-tier writes dropped because the write queue was full"},
    {S::kSharedLeasesTaken, "shared.leases_taken",
     "misses this daemon compiled for the fleet, holding the artifact's lease"},
    {S::kSharedLeaseWaits, "shared.lease_waits",
     "misses that waited for another daemon's compile (its lease was held)"},
    {S::kSharedLeaseWaitHits, "shared.lease_wait_hits",
     "waits that ended with the other daemon's entry: a compile saved"},
    {S::kSharedLeasesExpired, "shared.leases_expired",
     "waits that ended by taking the lease (expired: its holder died; or released unfilled)"},
    {S::kSharedLeaseWaitsTimedOut, "shared.lease_waits_timed_out",
     "waits that gave up after --shared-wait-seconds and compiled without the lease"},
    {S::kFastHits, "fast.hits", "resolves answered on the in-pod fast path (a view of the arena)"},
    {S::kFastFallbackMiss, "fast.fallback_miss",
     "fast-path resolves not answered there (a miss, or a compile gRPC would run): the client "
     "asked again over gRPC"},
    {S::kFastFallbackArenaFull, "fast.fallback_arena_full",
     "fast-path resolves sent to gRPC: every slot of the arena that could make room was leased"},
    {S::kFastFallbackLeaseBound, "fast.fallback_lease_bound",
     "fast-path resolves sent to gRPC: the connection held --fast-leased-max-bytes already"},
    {S::kFastConnectionsRefused, "fast.connections_refused",
     "fast-path connections refused: --fast-max-connections were open"},
    {S::kFastBadMessages, "fast.bad_messages",
     "fast-path messages refused: oversized, not a FastRequest, or an unknown lease"},
    {S::kFastLeasesHeld, "fast.leases_held", "fast-path leases held by clients now (a gauge)"},
    {S::kFastArenaBytes, "fast.arena_bytes",
     "bytes of the fast-path arena in slots now, leased or not (a gauge)"},
    {S::kSharedLeaseRenewals, "shared.lease_renewals",
     "renewals of a fleet lease this daemon held while its compile ran (every third of "
     "--shared-lease-seconds)"},
    {S::kCompileCpuMicros, "compile.cpu_micros",
     "CPU time (user + system) the compile workers reported for their compiles, microseconds"},
    {S::kStartupWarmedBytes, "startup.warmed_bytes",
     "payload bytes the start-up warm read from the stores (at most --warm-start-max-bytes)"},
    {S::kRedisHits, "redis.hits", "Redis-door keys found (GET, MGET; EXISTS not counted)"},
    {S::kRedisMisses, "redis.misses",
     "Redis-door keys not found or not served to the driver (GET, MGET)"},
    {S::kRedisBytesIn, "redis.bytes_in", "value bytes stored through the Redis door (SET)"},
    {S::kRedisBytesOut, "redis.bytes_out", "value bytes served through the Redis door"},
    {S::kRedisSets, "redis.sets", "values stored through the Redis door"},
    {S::kRedisRefusedValueTooBig, "redis.refused_value_too_big",
     "Redis-door commands refused: an argument over --redis-value-max-bytes (or the object "
     "bound)"},
    {S::kRedisRefusedNamespace, "redis.refused_namespace",
     "Redis-door commands refused: a key outside --redis-namespaces"},
    {S::kRedisRefusedCommand, "redis.refused_command",
     "Redis-door commands refused: unknown, wrong arity, bad option or database"},
    {S::kRedisRefusedProtocol, "redis.refused_protocol",
     "Redis-door connections closed: their bytes could not be framed as RESP"},
    {S::kRedisRefusedConnections, "redis.refused_connections",
     "Redis-door connections refused: --redis-max-connections were open"},
    {S::kRedisRefusedBuffer, "redis.refused_buffer",
     "Redis-door connections closed: over --redis-buffer-max-bytes of unanswered input"},
    {S::kRedisIdleClosed, "redis.idle_closed",
     "Redis-door connections closed after --redis-idle-seconds without a command"},
    {S::kRedisStoreErrors, "redis.store_errors",
     "Redis-door store reads or writes that failed (answered as errors)"},
    {S::kRedisConnections, "redis.connections", "Redis-door connections open now (a gauge)"},
    {S::kObjectLookups, "objects.lookups",
     "compiler launchers' lookups of a compile's entries (a listing by key, over gRPC or the "
     "fast path)"},
    {S::kObjectsServed, "objects.served", "compiler outputs served to launchers: their hits"},
    {S::kObjectsStored, "objects.stored", "compiler outputs launchers stored: their misses"},
    {S::kObjectPutsRefused, "objects.puts_refused",
     "launchers' puts refused: over --object-max-bytes, malformed, or a key a baked store holds"},
    {S::kRedisRefusedDriverTooOld, "redis.refused_driver_too_old",
     "Redis-door cubins not served: built by a toolkit newer than the connection's KCACHE.DRIVER"},
    {S::kRedisRefusedToolkitUnknown, "redis.refused_toolkit_unknown",
     "Redis-door cubins not served to a KCACHE.DRIVER connection: their toolkit is unreadable"},
    {S::kObjectFleetHits, "objects.fleet_hits",
     "client-made objects served from the fleet tier (--share-client-objects)"},
    {S::kObjectFleetMisses, "objects.fleet_misses",
     "client-made object lookups the fleet tier did not hold"},
    {S::kObjectFleetPuts, "objects.fleet_puts", "client-made objects written to the fleet tier"},
    {S::kObjectFleetRefused, "objects.fleet_refused",
     "fleet-tier objects not served: a frame that does not verify, or over its bound"},
    {S::kObjectFleetErrors, "objects.fleet_errors",
     "fleet-tier object calls that failed (the tier is then skipped for 5 s)"},
    {S::kObjectFleetWritesDropped, "objects.fleet_writes_dropped",
     "client-made objects not written to the fleet tier: 64 writes or --object-max-bytes waited"},
    // 98-113, objects.uncached_<reason>: added by WithUncachedRows.
    {S::kWriteBacksDropped, "tier.write_backs_dropped",
     "baked-store hits not copied into the writable store: --write-back-queue-max-bytes waited"},
    {S::kObjectMemoryHits, "objects.memory_hits",
     "launchers' listings and objects answered from --object-memory-max-bytes, not read from a "
     "store"},
    {S::kRedisRefusedTotal, "redis.refused_total_bytes",
     "Redis-door replies refused or connections closed: every connection together held "
     "--redis-total-max-bytes"},
    {S::kRedisHeldBytes, "redis.held_bytes",
     "bytes the Redis door's connections hold now: input not yet answered, commands waiting, "
     "replies not yet sent (a gauge)"},
    {S::kRedisRefusedKeyTooBig, "redis.refused_key_too_big",
     "Redis-door commands refused: a key over --redis-key-max-bytes"},
    {S::kObjectPutsRefusedUploads, "objects.puts_refused_uploads",
     "launchers' puts refused: the uploads in flight together held --object-upload-max-bytes"},
    {S::kObjectUploadBytes, "objects.upload_bytes",
     "bytes kcached holds for launchers' uploads (PutObject) now, twice each one's size (a "
     "gauge)"},
    {S::kObjectPutsRefusedEntryTooBig, "objects.puts_refused_entry_too_big",
     "launchers' puts refused: the entry (source, manifest, key fields) over "
     "--object-entry-max-bytes"},
    {S::kObjectListingSkipped, "objects.listing_skipped",
     "entries left out of `kcache export` listings: their metadata is over "
     "--object-entry-max-bytes (stored before that bound)"},
    {S::kBakedStoresSkippedDamaged, "store.baked_skipped_damaged",
     "--baked stores kcached started without: they did not open (damaged); rebuild them"},
    {S::kObjectTurnsHeld, "objects.turns_held",
     "launchers' misses that held the turn: they compiled for the launchers waiting on the "
     "same command"},
    {S::kObjectTurnWaits, "objects.turn_waits",
     "launchers' misses that waited for another launcher's compile of the same command (here, "
     "or in the fleet with --share-client-objects)"},
    {S::kObjectTurnWaitsServed, "objects.turn_waits_served",
     "waits whose launcher was then served the holder's entry: a compile saved"},
    {S::kObjectTurnWaitsNotServed, "objects.turn_waits_not_served",
     "waits whose launcher found the holder's entry not matching its files: it compiled"},
    {S::kObjectTurnWaitsReleased, "objects.turn_waits_released",
     "waits ended by the holder's compile failing or not being stored, or its fleet lease "
     "going: the launcher compiled"},
    {S::kObjectTurnWaitsGaveUp, "objects.turn_waits_gave_up",
     "waits past --object-wait-seconds: the launcher compiled"},
    {S::kObjectTurnCallsRefused, "objects.turn_calls_refused",
     "launchers' misses told to compile at once: --object-max-turn-calls were served already"},
    {S::kObjectTurnCalls, "objects.turn_calls",
     "launchers' turn calls kcached serves now, holding or waiting (a gauge)"},
    {S::kPtxBuildsQueued, "ptx_builds.queued",
     "builds of SASS from PTX a load sent (BuildFromPtx) queued"},
    {S::kPtxBuildsDropped, "ptx_builds.dropped",
     "builds of SASS from PTX not queued: --ptx-build-queue was full, or the client's share of it"},
    {S::kPtxBuildsHeld, "ptx_builds.held",
     "builds of SASS from PTX not needed: the stores held that SASS already"},
    {S::kPtxBuildsBuilt, "ptx_builds.built", "SASS built from PTX a load sent, and stored"},
    {S::kPtxBuildsFailed, "ptx_builds.failed",
     "builds of SASS from PTX that failed: nvJitLink refused the PTX, or a limit stopped it"},
    {S::kPtxBuildsRefused, "ptx_builds.refused",
     "BuildFromPtx requests refused: not PTX, over the size bound, not for the GPU named, or no "
     "toolkit that may build"},
    {S::kProtobufLogLinesDropped, "log.protobuf_lines_dropped",
     "libprotobuf's log lines (one per client message with a string that is not UTF-8) not "
     "written: past 5 a minute"},
    {S::kRunCudaStandInPreloaded, "run.cuda_stand_in_preloaded",
     "kcache run commands that preloaded kcache's CUDA driver stand-in (its start check passed)"},
    {S::kRunCudaStandInRefused, "run.cuda_stand_in_refused",
     "kcache run commands whose start check refused the node's CUDA driver: nothing preloaded"},
    {S::kRunCudaStandInOff, "run.cuda_stand_in_off",
     "kcache run commands with the CUDA driver stand-in switched off (--no-cuda, "
     "KCACHE_CUDA_STANDIN=0)"},
};
constexpr std::array<StatisticInfo, kStatisticCount> kTable = WithUncachedRows(kRows, Uncached);

constexpr bool NumberedInOrder() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].id) != i + 1) return false;
  }
  return true;
}
static_assert(NumberedInOrder(), "kStatisticInfo must list every Statistic in number order");

}  // namespace

const std::array<StatisticInfo, kStatisticCount> kStatisticInfo = kTable;

Statistic HitStatistic(CacheTier tier) {
  switch (tier) {
    case CacheTier::kMemory:
      return S::kHitMemory;
    case CacheTier::kLocalStore:
      return S::kHitLocalStore;
    case CacheTier::kBakedStore:
      return S::kHitBakedStore;
    case CacheTier::kCompile:
      return S::kHitCompile;
    case CacheTier::kShared:
      return S::kHitShared;
  }
  return S::kHitCompile;
}

Statistic RuleStatistic(ServeRule rule) {
  switch (rule) {
    case ServeRule::kExactSass:
      return S::kRuleExactSass;
    case ServeRule::kCompatibleSass:
      return S::kRuleCompatibleSass;
    case ServeRule::kPtxJit:
      return S::kRulePtxJit;
    case ServeRule::kCompiled:
      return S::kRuleCompiled;
  }
  return S::kRuleCompiled;
}

Statistic MissStatistic(MissReason reason) {
  switch (reason) {
    case MissReason::kUnknownKernel:
      return S::kMissUnknownKernel;
    case MissReason::kBelowMinArch:
      return S::kMissBelowMinArch;
    case MissReason::kAboveMaxArch:
      return S::kMissAboveMaxArch;
    case MissReason::kNoToolkit:
      return S::kMissNoToolkit;
    case MissReason::kCompileNotAllowed:
      return S::kMissCompileNotAllowed;
    case MissReason::kCompileError:
      return S::kMissCompileError;
    case MissReason::kDriverTooOld:
      return S::kMissDriverTooOld;
    case MissReason::kNothingServable:
      return S::kMissNothingServable;
  }
  return S::kMissNothingServable;
}

absl::string_view ResolveOutcomeName(ResolveOutcome outcome) {
  switch (outcome) {
    case ResolveOutcome::kMemory:
      return "memory";
    case ResolveOutcome::kLocalStore:
      return "local_store";
    case ResolveOutcome::kBakedStore:
      return "baked_store";
    case ResolveOutcome::kCompile:
      return "compile";
    case ResolveOutcome::kMiss:
      return "miss";
    case ResolveOutcome::kInvalid:
      return "invalid";
    case ResolveOutcome::kError:
      return "error";
    case ResolveOutcome::kShared:
      return "shared";
  }
  return "error";
}

ResolveOutcome OutcomeOf(CacheTier tier) {
  switch (tier) {
    case CacheTier::kMemory:
      return ResolveOutcome::kMemory;
    case CacheTier::kLocalStore:
      return ResolveOutcome::kLocalStore;
    case CacheTier::kBakedStore:
      return ResolveOutcome::kBakedStore;
    case CacheTier::kCompile:
      return ResolveOutcome::kCompile;
    case CacheTier::kShared:
      return ResolveOutcome::kShared;
  }
  return ResolveOutcome::kError;
}

std::vector<HistogramValue> Statistics::Histograms() const {
  std::vector<HistogramValue> out;
  for (int i = 0; i < kResolveOutcomeCount; ++i) {
    out.push_back(resolve_seconds_[i].Read(
        "resolve.seconds", "time the cache took to answer a Resolve, by how it ended", "outcome",
        std::string(ResolveOutcomeName(static_cast<ResolveOutcome>(i)))));
  }
  out.push_back(compile_seconds_.Read("compile.seconds",
                                      "wall time of a compile (once per single-flight)", "", ""));
  return out;
}

std::vector<CounterValue> Statistics::Values() const {
  std::vector<CounterValue> out;
  out.reserve(kStatisticInfo.size());
  for (const StatisticInfo& info : kStatisticInfo) {
    out.push_back(CounterValue{std::string(info.name), std::string(info.help), Get(info.id)});
  }
  return out;
}

}  // namespace kcache
