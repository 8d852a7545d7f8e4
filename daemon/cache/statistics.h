// The artifact cache's counters: a numbered, append-only list with a line of help each (the
// habit of ccache's core/statistic.hpp). A number is never reused or renumbered and a name
// never changes meaning: `kcache stat --json`, metrics and dashboards key on them.
// docs/statistics.md lists them; add new ones at the end of both.
#ifndef KCACHE_DAEMON_CACHE_STATISTICS_H_
#define KCACHE_DAEMON_CACHE_STATISTICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/compat.h"
#include "core/compiler_command.h"
#include "daemon/cache/cache_types.h"
#include "daemon/cache/histogram.h"
#include "daemon/cache/uncached_options.h"

namespace kcache {

enum class Statistic : int {
  kResolveRequests = 1,
  kHitMemory = 2,
  kHitLocalStore = 3,
  kHitBakedStore = 4,
  kHitCompile = 5,
  kRuleExactSass = 6,
  kRuleCompatibleSass = 7,
  kRulePtxJit = 8,
  kRuleCompiled = 9,
  kMissUnknownKernel = 10,
  kMissBelowMinArch = 11,
  kMissAboveMaxArch = 12,
  kMissNoToolkit = 13,
  kMissCompileNotAllowed = 14,
  kMissCompileError = 15,
  kMissNothingServable = 16,
  kInvalidRequests = 17,
  kCompiles = 18,
  kCompileErrors = 19,
  kCompileMicros = 20,
  kCompileMicrosSaved = 21,
  kSingleFlightWaiters = 22,
  kBytesServed = 23,
  kChecksumFailures = 24,
  kTierFailures = 25,
  kTiersSwitchedOff = 26,
  kTierSkips = 27,
  kMemoryEvictions = 28,
  kMemoryInvalidations = 29,
  kWriteBacks = 30,
  kKernelsRegistered = 31,
  kSeenDropped = 32,
  kWarmRuns = 33,
  kMissDriverTooOld = 34,
  kBackgroundCompilesQueued = 35,
  kBackgroundCompilesDropped = 36,
  kCompileQueueMicros = 37,
  kCompileLimitStops = 38,
  kCallsRefusedBusy = 39,
  kResolveRefusedQueuedBytes = 40,
  kStoreEvictions = 41,
  kStoreEvictedBytes = 42,
  kStoreWritesRefusedFull = 43,
  kStoreReplacedDamaged = 44,
  kCompilesDropped = 45,
  kCompileLimitSkips = 46,
  kHitShared = 47,
  kSharedHits = 48,
  kSharedMisses = 49,
  kSharedErrors = 50,
  kSharedRejected = 51,
  kSharedWrites = 52,
  kSharedSkips = 53,
  kSharedTooBig = 54,
  kSharedWritesDropped = 55,
  kSharedLeasesTaken = 56,
  kSharedLeaseWaits = 57,
  kSharedLeaseWaitHits = 58,
  kSharedLeasesExpired = 59,
  kSharedLeaseWaitsTimedOut = 60,
  kFastHits = 61,
  kFastFallbackMiss = 62,
  kFastFallbackArenaFull = 63,
  kFastFallbackLeaseBound = 64,
  kFastConnectionsRefused = 65,
  kFastBadMessages = 66,
  kFastLeasesHeld = 67,  // a gauge: leases held now
  kFastArenaBytes = 68,  // a gauge: arena bytes in slots now
  kSharedLeaseRenewals = 69,
  kCompileCpuMicros = 70,
  kStartupWarmedBytes = 71,
  kRedisHits = 72,
  kRedisMisses = 73,
  kRedisBytesIn = 74,
  kRedisBytesOut = 75,
  kRedisSets = 76,
  kRedisRefusedValueTooBig = 77,
  kRedisRefusedNamespace = 78,
  kRedisRefusedCommand = 79,
  kRedisRefusedProtocol = 80,
  kRedisRefusedConnections = 81,
  kRedisRefusedBuffer = 82,
  kRedisIdleClosed = 83,
  kRedisStoreErrors = 84,
  kRedisConnections = 85,  // a gauge: Redis-door connections open now
  kObjectLookups = 86,
  kObjectsServed = 87,
  kObjectsStored = 88,
  kObjectPutsRefused = 89,
  kRedisRefusedDriverTooOld = 90,
  kRedisRefusedToolkitUnknown = 91,
  kObjectFleetHits = 92,
  kObjectFleetMisses = 93,
  kObjectFleetPuts = 94,
  kObjectFleetRefused = 95,
  kObjectFleetErrors = 96,
  kObjectFleetWritesDropped = 97,
  // Launcher commands run uncached, by reason, in UncachedReason's order (UncachedStatistic).
  kObjectUncachedNotACompile = 98,
  kObjectUncachedPreprocessOnly = 99,
  kObjectUncachedOtherOutput = 100,
  kObjectUncachedNoSource = 101,
  kObjectUncachedSeveralInputs = 102,
  kObjectUncachedStdin = 103,
  kObjectUncachedKeepTemps = 104,
  kObjectUncachedResponseFile = 105,
  kObjectUncachedProfiling = 106,
  kObjectUncachedUnknownOption = 107,
  kObjectUncachedNoOutput = 108,
  kObjectUncachedUserOnlyDeps = 109,
  kObjectUncachedTimeMacros = 110,
  kObjectUncachedUnreadableInput = 111,
  kObjectUncachedInputChanged = 112,
  kObjectUncachedNativeTarget = 113,
  kWriteBacksDropped = 114,
  kObjectMemoryHits = 115,
  kRedisRefusedTotal = 116,
  kRedisHeldBytes = 117,  // a gauge: bytes the Redis door's connections hold now
  kRedisRefusedKeyTooBig = 118,
  kObjectPutsRefusedUploads = 119,
  kObjectUploadBytes = 120,  // a gauge: bytes of PutObject uploads held now
  kObjectPutsRefusedEntryTooBig = 121,
  kObjectListingSkipped = 122,
  kBakedStoresSkippedDamaged = 123,
  // Launchers' turns (daemon/objects/compile_turns.h): one compile per miss.
  kObjectTurnsHeld = 124,
  kObjectTurnWaits = 125,
  kObjectTurnWaitsServed = 126,
  kObjectTurnWaitsNotServed = 127,
  kObjectTurnWaitsReleased = 128,
  kObjectTurnWaitsGaveUp = 129,
  kObjectTurnCallsRefused = 130,
  kObjectTurnCalls = 131,  // a gauge: turn calls served now
  kPtxBuildsQueued = 132,
  kPtxBuildsDropped = 133,
  kPtxBuildsHeld = 134,
  kPtxBuildsBuilt = 135,
  kPtxBuildsFailed = 136,
  kPtxBuildsRefused = 137,
  kProtobufLogLinesDropped = 138,
  kRunCudaStandInPreloaded = 139,  // told by `kcache run` (StandInStart, core/protocol.h)
  kRunCudaStandInRefused = 140,
  kRunCudaStandInOff = 141,
  // Append here (and to kStatisticInfo and docs/statistics.md); never renumber.
};
inline constexpr int kStatisticCount = 141;

struct StatisticInfo {
  Statistic id;
  absl::string_view name;  // "resolve.hit.memory"
  absl::string_view help;  // one line
};
// Every statistic, in number order (kStatisticInfo[i].id == i + 1).
extern const std::array<StatisticInfo, kStatisticCount> kStatisticInfo;

Statistic HitStatistic(CacheTier tier);
Statistic RuleStatistic(ServeRule rule);
Statistic MissStatistic(MissReason reason);

// The counter of launcher commands run uncached for `reason` (1 to 16: reason r is number
// 97 + r), named objects.uncached_<UncachedReasonName>. kNone has none: not to be asked.
constexpr Statistic UncachedStatistic(UncachedReason reason) {
  return static_cast<Statistic>(static_cast<int>(Statistic::kObjectUncachedNotACompile) - 1 +
                                static_cast<int>(reason));
}
static_assert(UncachedStatistic(UncachedReason::kNativeTarget) ==
                      Statistic::kObjectUncachedNativeTarget &&
                  kUncachedReasonCount == 17,
              "a new UncachedReason needs its own Statistic, appended, and UncachedStatistic to "
              "map it there");

// A table of one row per statistic, in number order: `rows` holds every row but the uncached
// ones (98-113), in order, and `uncached(reason)` makes those. kStatisticInfo and the metric
// mappings take their uncached rows from UncachedReasonName so, never from a list of their own.
template <typename Row, size_t M, typename MakeUncached>
constexpr std::array<Row, kStatisticCount> WithUncachedRows(const Row (&rows)[M],
                                                            MakeUncached uncached) {
  static_assert(M + kUncachedReasonCount - 1 == kStatisticCount, "a row for every statistic");
  std::array<Row, kStatisticCount> table{};
  const Row* next = rows;
  for (int number = 1; number <= kStatisticCount; ++number) {
    int reason = number - static_cast<int>(Statistic::kObjectUncachedNotACompile) + 1;
    bool is_uncached = reason >= 1 && reason < kUncachedReasonCount;
    table[number - 1] = is_uncached ? uncached(static_cast<UncachedReason>(reason)) : *next++;
  }
  return table;
}

// How a Resolve ended, for its latency histogram: served from a tier, a miss (NotFound: the
// answer was "no"), refused as malformed, or failed (compile error, limits, every tier down).
enum class ResolveOutcome : int {
  kMemory = 0,
  kLocalStore,
  kBakedStore,
  kCompile,
  kMiss,
  kInvalid,
  kError,
  kShared,
};
inline constexpr int kResolveOutcomeCount = 8;
absl::string_view ResolveOutcomeName(ResolveOutcome outcome);  // "memory", ..., "error"
ResolveOutcome OutcomeOf(CacheTier tier);

// Lock-free counters; every method is thread-safe.
class Statistics {
 public:
  // Launcher commands run uncached by the option that decided it (a bounded table beside the
  // counters: the objects.uncached_<reason> counters count every such command once).
  UncachedOptionCounts& uncached_options() { return uncached_options_; }
  const UncachedOptionCounts& uncached_options() const { return uncached_options_; }

  void Add(Statistic s, uint64_t n = 1) {
    counters_[Index(s)].fetch_add(n, std::memory_order_relaxed);
  }
  // A gauge moves by `delta`, which may be negative (it wraps, and reads back as the sum).
  void Move(Statistic s, int64_t delta) { Add(s, static_cast<uint64_t>(delta)); }
  uint64_t Get(Statistic s) const { return counters_[Index(s)].load(std::memory_order_relaxed); }

  // Every counter, in number order, with its name and help.
  std::vector<CounterValue> Values() const;

  // Latencies: a Resolve inside the cache (by outcome) and a compile (one per single-flight).
  void RecordResolve(ResolveOutcome outcome, absl::Duration duration) {
    resolve_seconds_[static_cast<size_t>(outcome)].Record(duration);
  }
  void RecordCompile(absl::Duration duration) { compile_seconds_.Record(duration); }
  // A Resolve refused before it reached the cache (a malformed request), `elapsed` after it
  // arrived: a request and an invalid one (resolve.requests, resolve.invalid), timed under
  // outcome "invalid", as the cache counts the queries it refuses itself.
  void RecordInvalidRequest(absl::Duration elapsed) {
    Add(Statistic::kResolveRequests);
    Add(Statistic::kInvalidRequests);
    RecordResolve(ResolveOutcome::kInvalid, elapsed);
  }

  // "resolve.seconds" once per outcome (label "outcome"), then "compile.seconds".
  std::vector<HistogramValue> Histograms() const;

 private:
  static size_t Index(Statistic s) { return static_cast<size_t>(s) - 1; }
  std::array<std::atomic<uint64_t>, kStatisticCount> counters_{};
  std::array<LatencyHistogram, kResolveOutcomeCount> resolve_seconds_;
  LatencyHistogram compile_seconds_;
  UncachedOptionCounts uncached_options_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_STATISTICS_H_
