#include "daemon/host/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "daemon/service/accept_rules.h"

namespace kcache {
namespace {

using S = Statistic;

constexpr char kHits[] = "kcache_resolve_hits_total";
constexpr char kHitsHelp[] = "Resolves served, by the tier that served them.";
constexpr char kRules[] = "kcache_resolve_rule_total";
constexpr char kRulesHelp[] = "Resolves served, by the serving rule that chose the artifact.";
constexpr char kMisses[] = "kcache_resolve_misses_total";
constexpr char kMissesHelp[] = "Resolves answered with no artifact, by reason.";

constexpr char kRedisBytes[] = "kcache_redis_bytes_total";
constexpr char kRedisBytesHelp[] = "Value bytes through the Redis door, by direction.";
constexpr char kRedisRefused[] = "kcache_redis_refused_total";
constexpr char kRedisRefusedHelp[] =
    "Redis-door commands or connections refused, by reason (docs/torch-compile.md).";
constexpr char kObjects[] = "kcache_objects_total";
constexpr char kObjectsHelp[] = "Compiler outputs served to or stored by launchers.";
constexpr char kObjectPutsRefused[] = "kcache_object_puts_refused_total";
constexpr char kObjectPutsRefusedHelp[] =
    "Launchers' puts refused for a bound, by the bound (docs/kcached.md).";
constexpr char kObjectTurns[] = "kcache_object_turns_total";
constexpr char kObjectTurnsHelp[] =
    "Launchers' misses that held the turn, waited for another's compile, or were refused one.";
constexpr char kPtxBuilds[] = "kcache_ptx_builds_total";
constexpr char kPtxBuildsHelp[] =
    "Builds of SASS from PTX that loads sent (BuildFromPtx), by what became of each request.";
constexpr char kCudaStandIn[] = "kcache_run_cuda_stand_in_total";
constexpr char kCudaStandInHelp[] =
    "kcache run commands by how kcache's CUDA driver stand-in entered them: preloaded, refused "
    "by its start check (nothing preloaded), or switched off.";
constexpr char kObjectTurnWaits[] = "kcache_object_turn_waits_total";
constexpr char kObjectTurnWaitsHelp[] = "How launchers' waits for another's compile ended.";
constexpr char kObjectFleet[] = "kcache_object_fleet_total";
constexpr char kObjectFleetHelp[] =
    "Client-made objects on the fleet tier (--share-client-objects), by outcome.";

constexpr char kUncached[] = "kcache_launcher_uncached_total";
constexpr char kUncachedHelp[] =
    "Compiler launcher commands run uncached, by reason (told by kcache-launch over the fast "
    "path; docs/torch-extensions.md).";

// A reason's sample: its statistic, labelled with the reason's name.
constexpr MetricMapping Uncached(UncachedReason reason) {
  return {UncachedStatistic(reason), kUncached, kUncachedHelp, "reason",
          UncachedReasonName(reason)};
}

constexpr MetricMapping kRows[] = {
    {S::kResolveRequests, "kcache_resolve_requests_total", "Resolve calls received.", "", ""},
    {S::kHitMemory, kHits, kHitsHelp, "tier", "memory"},
    {S::kHitLocalStore, kHits, kHitsHelp, "tier", "local_store"},
    {S::kHitBakedStore, kHits, kHitsHelp, "tier", "baked_store"},
    {S::kHitCompile, kHits, kHitsHelp, "tier", "compile"},
    {S::kRuleExactSass, kRules, kRulesHelp, "rule", "exact_sass"},
    {S::kRuleCompatibleSass, kRules, kRulesHelp, "rule", "compatible_sass"},
    {S::kRulePtxJit, kRules, kRulesHelp, "rule", "ptx_jit"},
    {S::kRuleCompiled, kRules, kRulesHelp, "rule", "compiled"},
    {S::kMissUnknownKernel, kMisses, kMissesHelp, "reason", "unknown_kernel"},
    {S::kMissBelowMinArch, kMisses, kMissesHelp, "reason", "below_min_arch"},
    {S::kMissAboveMaxArch, kMisses, kMissesHelp, "reason", "above_max_arch"},
    {S::kMissNoToolkit, kMisses, kMissesHelp, "reason", "no_toolkit"},
    {S::kMissCompileNotAllowed, kMisses, kMissesHelp, "reason", "compile_not_allowed"},
    {S::kMissCompileError, kMisses, kMissesHelp, "reason", "compile_error"},
    {S::kMissNothingServable, kMisses, kMissesHelp, "reason", "nothing_servable"},
    {S::kInvalidRequests, "kcache_resolve_invalid_total", "Resolve calls refused as malformed.", "",
     ""},
    {S::kCompiles, "kcache_compiles_total", "Compiles run (misses and warms; once per flight).", "",
     ""},
    {S::kCompileErrors, "kcache_compile_errors_total", "Compiles that failed.", "", ""},
    {S::kCompileMicros, "kcache_compile_seconds_total", "Wall time spent compiling.", "", "", 1e6},
    {S::kCompileMicrosSaved, "kcache_compile_seconds_saved_total",
     "Compile time of the artifacts served from memory or a store instead of compiled.", "", "",
     1e6},
    {S::kSingleFlightWaiters, "kcache_single_flight_waiters_total",
     "Requests or warm jobs that waited for a compile another one started.", "", ""},
    {S::kBytesServed, "kcache_served_bytes_total", "Payload bytes of the artifacts served.", "",
     ""},
    {S::kChecksumFailures, "kcache_store_checksum_failures_total",
     "Corrupt entries the stores found since open (each dropped and rebuilt).", "", ""},
    {S::kTierFailures, "kcache_tier_failures_total",
     "Store calls that failed with an error other than not found.", "", ""},
    {S::kTiersSwitchedOff, "kcache_tier_switched_off_total",
     "Times a failing store tier was switched off.", "", ""},
    {S::kTierSkips, "kcache_tier_skips_total",
     "Store calls skipped because their tier was switched off.", "", ""},
    {S::kMemoryEvictions, "kcache_memory_evictions_total",
     "Memory cache entries evicted to stay within --memory-cache-max-bytes.", "", ""},
    {S::kMemoryInvalidations, "kcache_memory_invalidations_total",
     "Memory cache entries dropped because a new artifact of their kernel was stored.", "", ""},
    {S::kWriteBacks, "kcache_write_backs_total", "Baked-store hits copied into the writable store.",
     "", ""},
    {S::kKernelsRegistered, "kcache_kernels_registered_total",
     "Kernel specs received in requests and registered in the writable store.", "", ""},
    {S::kSeenDropped, "kcache_seen_dropped_total",
     "Requests not recorded for export-manifest (the table of seen kernels was full).", "", ""},
    {S::kWarmRuns, "kcache_warm_runs_total", "Warm calls run.", "", ""},
    {S::kMissDriverTooOld, kMisses, kMissesHelp, "reason", "driver_too_old"},
    {S::kBackgroundCompilesQueued, "kcache_background_compiles_queued_total",
     "SASS compiles queued behind a PTX answer taken now (ptx_now).", "", ""},
    {S::kBackgroundCompilesDropped, "kcache_background_compiles_dropped_total",
     "SASS compiles not queued behind a PTX answer: the background queue was full.", "", ""},
    {S::kCompileQueueMicros, "kcache_compile_queue_seconds_total",
     "Time compiles waited for a free compile worker (not in compile seconds).", "", "", 1e6},
    {S::kCompileLimitStops, "kcache_compile_limit_stops_total",
     "Compiles stopped by the wall-clock, CPU-time or memory limit.", "", ""},
    {S::kCallsRefusedBusy, "kcache_calls_refused_total",
     "Calls refused RESOURCE_EXHAUSTED because a bound of the daemon was reached.", "bound",
     "calls_in_flight"},
    {S::kResolveRefusedQueuedBytes, "kcache_calls_refused_total",
     "Calls refused RESOURCE_EXHAUSTED because a bound of the daemon was reached.", "bound",
     "queued_bytes"},
    {S::kStoreEvictions, "kcache_store_evictions_total",
     "Entries evicted from the writable store to stay within --store-max-bytes.", "", ""},
    {S::kStoreEvictedBytes, "kcache_store_evicted_bytes_total",
     "Bytes of the entries evicted from the writable store.", "", ""},
    {S::kStoreWritesRefusedFull, "kcache_store_writes_refused_full_total",
     "Writes to the writable store refused because its disk was full.", "", ""},
    {S::kStoreReplacedDamaged, "kcache_store_replaced_damaged_total",
     "Writable stores that could not open and were moved aside and replaced at start.", "", ""},
    {S::kCompilesDropped, "kcache_compiles_dropped_total",
     "Compiles that left the queue without running: every caller had given up.", "", ""},
    {S::kCompileLimitSkips, "kcache_compile_limit_skips_total",
     "Compiles not run: the same kernel and target was stopped by a limit lately.", "", ""},
    {S::kHitShared, kHits, kHitsHelp, "tier", "shared"},
    {S::kSharedHits, "kcache_shared_hits_total",
     "Artifacts fetched from the shared tier and verified.", "", ""},
    {S::kSharedMisses, "kcache_shared_misses_total", "Shared-tier lookups that found no entry.", "",
     ""},
    {S::kSharedErrors, "kcache_shared_errors_total",
     "Shared-tier calls that failed or ran past the budget.", "", ""},
    {S::kSharedRejected, "kcache_shared_rejected_total",
     "Shared-tier entries that failed verification: never served.", "", ""},
    {S::kSharedWrites, "kcache_shared_writes_total", "Artifacts written to the shared tier.", "",
     ""},
    {S::kSharedSkips, "kcache_shared_skips_total",
     "Shared-tier calls skipped while the tier is switched off after failures.", "", ""},
    {S::kSharedTooBig, "kcache_shared_too_big_total",
     "Artifacts kept out of the shared tier: larger than --shared-max-bytes.", "", ""},
    {S::kSharedWritesDropped, "kcache_shared_writes_dropped_total",
     "Shared-tier writes dropped because the write queue was full.", "", ""},
    {S::kSharedLeasesTaken, "kcache_shared_leases_taken_total",
     "Misses compiled for the fleet, holding the artifact's lease.", "", ""},
    {S::kSharedLeaseWaits, "kcache_shared_lease_waits_total",
     "Misses that waited for another daemon's compile.", "", ""},
    {S::kSharedLeaseWaitHits, "kcache_shared_lease_wait_hits_total",
     "Waits that ended with the other daemon's entry.", "", ""},
    {S::kSharedLeasesExpired, "kcache_shared_leases_expired_total",
     "Waits that ended by taking the lease after it expired or was released.", "", ""},
    {S::kSharedLeaseWaitsTimedOut, "kcache_shared_lease_waits_timed_out_total",
     "Waits that gave up after --shared-wait-seconds.", "", ""},
    {S::kFastHits, "kcache_fast_hits_total", "Resolves answered on the in-pod fast path.", "", ""},
    {S::kFastFallbackMiss, "kcache_fast_fallbacks_total",
     "Fast-path resolves the client had to ask again over gRPC, by cause.", "cause", "miss"},
    {S::kFastFallbackArenaFull, "kcache_fast_fallbacks_total",
     "Fast-path resolves the client had to ask again over gRPC, by cause.", "cause", "arena_full"},
    {S::kFastFallbackLeaseBound, "kcache_fast_fallbacks_total",
     "Fast-path resolves the client had to ask again over gRPC, by cause.", "cause", "lease_bound"},
    {S::kFastConnectionsRefused, "kcache_fast_connections_refused_total",
     "Fast-path connections refused past --fast-max-connections.", "", ""},
    {S::kFastBadMessages, "kcache_fast_bad_messages_total",
     "Fast-path messages refused as oversized or malformed.", "", ""},
    {S::kFastLeasesHeld, "kcache_fast_leases", "Fast-path leases held by clients now.", "", ""},
    {S::kFastArenaBytes, "kcache_fast_arena_bytes", "Bytes of the fast-path arena in slots now.",
     "", ""},
    {S::kSharedLeaseRenewals, "kcache_shared_lease_renewals_total",
     "Renewals of fleet leases held while their compiles ran.", "", ""},
    {S::kCompileCpuMicros, "kcache_compile_cpu_seconds_total",
     "CPU time the compile workers reported for their compiles.", "", "", 1e6},
    {S::kStartupWarmedBytes, "kcache_startup_warmed_bytes_total",
     "Payload bytes the start-up warm read from the stores.", "", ""},
    {S::kRedisHits, "kcache_redis_hits_total", "Redis-door keys found (GET, MGET).", "", ""},
    {S::kRedisMisses, "kcache_redis_misses_total", "Redis-door keys not found (GET, MGET).", "",
     ""},
    {S::kRedisBytesIn, kRedisBytes, kRedisBytesHelp, "direction", "in"},
    {S::kRedisBytesOut, kRedisBytes, kRedisBytesHelp, "direction", "out"},
    {S::kRedisSets, "kcache_redis_sets_total", "Values stored through the Redis door.", "", ""},
    {S::kRedisRefusedValueTooBig, kRedisRefused, kRedisRefusedHelp, "reason", "value_too_big"},
    {S::kRedisRefusedNamespace, kRedisRefused, kRedisRefusedHelp, "reason", "namespace"},
    {S::kRedisRefusedCommand, kRedisRefused, kRedisRefusedHelp, "reason", "command"},
    {S::kRedisRefusedProtocol, kRedisRefused, kRedisRefusedHelp, "reason", "protocol"},
    {S::kRedisRefusedConnections, kRedisRefused, kRedisRefusedHelp, "reason", "connections"},
    {S::kRedisRefusedBuffer, kRedisRefused, kRedisRefusedHelp, "reason", "buffer"},
    {S::kRedisIdleClosed, "kcache_redis_idle_closed_total",
     "Redis-door connections closed for idleness (--redis-idle-seconds).", "", ""},
    {S::kRedisStoreErrors, "kcache_redis_store_errors_total",
     "Redis-door store reads or writes that failed.", "", ""},
    {S::kRedisConnections, "kcache_redis_connections", "Redis-door connections open now.", "", ""},
    {S::kObjectLookups, "kcache_object_lookups_total",
     "Compiler launchers' lookups of a compile's entries.", "", ""},
    {S::kObjectsServed, kObjects, kObjectsHelp, "outcome", "served"},
    {S::kObjectsStored, kObjects, kObjectsHelp, "outcome", "stored"},
    {S::kObjectPutsRefused, kObjects, kObjectsHelp, "outcome", "refused"},
    {S::kRedisRefusedDriverTooOld, kRedisRefused, kRedisRefusedHelp, "reason", "driver_too_old"},
    {S::kRedisRefusedToolkitUnknown, kRedisRefused, kRedisRefusedHelp, "reason", "toolkit_unknown"},
    {S::kObjectFleetHits, kObjectFleet, kObjectFleetHelp, "outcome", "hit"},
    {S::kObjectFleetMisses, kObjectFleet, kObjectFleetHelp, "outcome", "miss"},
    {S::kObjectFleetPuts, kObjectFleet, kObjectFleetHelp, "outcome", "put"},
    {S::kObjectFleetRefused, kObjectFleet, kObjectFleetHelp, "outcome", "refused"},
    {S::kObjectFleetErrors, kObjectFleet, kObjectFleetHelp, "outcome", "error"},
    {S::kObjectFleetWritesDropped, kObjectFleet, kObjectFleetHelp, "outcome", "write_dropped"},
    // 98-113, kcache_launcher_uncached_total{reason}: added by WithUncachedRows.
    {S::kWriteBacksDropped, "kcache_write_backs_dropped_total",
     "Baked-store hits not copied into the writable store: its queue was full.", "", ""},
    {S::kObjectMemoryHits, "kcache_object_memory_hits_total",
     "Launchers' listings and objects answered from memory, not read from a store.", "", ""},
    {S::kRedisRefusedTotal, kRedisRefused, kRedisRefusedHelp, "reason", "total_bytes"},
    {S::kRedisHeldBytes, "kcache_redis_held_bytes",
     "Bytes the Redis door's connections hold now (bound: --redis-total-max-bytes).", "", ""},
    {S::kRedisRefusedKeyTooBig, kRedisRefused, kRedisRefusedHelp, "reason", "key_too_big"},
    {S::kObjectPutsRefusedUploads, kObjectPutsRefused, kObjectPutsRefusedHelp, "reason",
     "uploads_bound"},
    {S::kObjectUploadBytes, "kcache_object_upload_bytes",
     "Bytes held for launchers' uploads now, twice each one's size (bound: "
     "--object-upload-max-bytes).",
     "", ""},
    {S::kObjectPutsRefusedEntryTooBig, kObjectPutsRefused, kObjectPutsRefusedHelp, "reason",
     "entry_too_big"},
    {S::kObjectListingSkipped, "kcache_object_listing_skipped_total",
     "Entries left out of export listings: metadata over --object-entry-max-bytes.", "", ""},
    {S::kBakedStoresSkippedDamaged, "kcache_baked_stores_skipped_damaged",
     "--baked stores kcached started without because they did not open.", "", ""},
    {S::kObjectTurnsHeld, kObjectTurns, kObjectTurnsHelp, "outcome", "held"},
    {S::kObjectTurnWaits, kObjectTurns, kObjectTurnsHelp, "outcome", "waited"},
    {S::kObjectTurnWaitsServed, kObjectTurnWaits, kObjectTurnWaitsHelp, "end", "served"},
    {S::kObjectTurnWaitsNotServed, kObjectTurnWaits, kObjectTurnWaitsHelp, "end", "not_served"},
    {S::kObjectTurnWaitsReleased, kObjectTurnWaits, kObjectTurnWaitsHelp, "end", "released"},
    {S::kObjectTurnWaitsGaveUp, kObjectTurnWaits, kObjectTurnWaitsHelp, "end", "gave_up"},
    {S::kObjectTurnCallsRefused, kObjectTurns, kObjectTurnsHelp, "outcome", "refused"},
    {S::kObjectTurnCalls, "kcache_object_turn_calls",
     "Launchers' turn calls served now (bound: --object-max-turn-calls).", "", ""},
    {S::kPtxBuildsQueued, kPtxBuilds, kPtxBuildsHelp, "outcome", "queued"},
    {S::kPtxBuildsDropped, kPtxBuilds, kPtxBuildsHelp, "outcome", "dropped"},
    {S::kPtxBuildsHeld, kPtxBuilds, kPtxBuildsHelp, "outcome", "held"},
    {S::kPtxBuildsBuilt, kPtxBuilds, kPtxBuildsHelp, "outcome", "built"},
    {S::kPtxBuildsFailed, kPtxBuilds, kPtxBuildsHelp, "outcome", "failed"},
    {S::kPtxBuildsRefused, kPtxBuilds, kPtxBuildsHelp, "outcome", "refused"},
    {S::kProtobufLogLinesDropped, "kcache_log_lines_dropped_total",
     "Log lines not written, past their bound, by source.", "source", "protobuf"},
    {S::kRunCudaStandInPreloaded, kCudaStandIn, kCudaStandInHelp, "start", "preloaded"},
    {S::kRunCudaStandInRefused, kCudaStandIn, kCudaStandInHelp, "start", "refused"},
    {S::kRunCudaStandInOff, kCudaStandIn, kCudaStandInHelp, "start", "off"},
};
constexpr std::array<MetricMapping, kStatisticCount> kMappings = WithUncachedRows(kRows, Uncached);

constexpr bool MappedInOrder() {
  for (size_t i = 0; i < kMappings.size(); ++i) {
    if (static_cast<size_t>(kMappings[i].statistic) != i + 1) return false;
  }
  return true;
}
static_assert(MappedInOrder(), "kMappings must map every Statistic, in number order");

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string Escape(absl::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return absl::StrFormat("%.9g", value);
}

// Writes families: a HELP and TYPE header the first time a family appears, then its samples.
class Exposition {
 public:
  void Sample(absl::string_view family, absl::string_view type, absl::string_view help,
              absl::string_view labels, double value, absl::string_view suffix = "") {
    if (family != current_) {
      absl::StrAppend(&out_, "# HELP ", family, " ", Escape(help, false), "\n# TYPE ", family, " ",
                      type, "\n");
      current_ = std::string(family);
    }
    absl::StrAppend(&out_, family, suffix, labels.empty() ? "" : "{", labels,
                    labels.empty() ? "" : "}", " ", Number(value), "\n");
  }

  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string current_;
};

std::string Label(absl::string_view name, absl::string_view value) {
  if (name.empty()) return "";
  return absl::StrCat(name, "=\"", Escape(value, true), "\"");
}

std::string Join(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  return absl::StrCat(a, ",", b);
}

// Every family's samples together (the exposition format wants one HELP/TYPE per family),
// families in the order they first appear in kMappings: a statistic appended later to a
// labelled family (miss.driver_too_old) joins its family's block.
void Counters(const CacheSnapshot& snapshot, Exposition& out) {
  std::vector<absl::string_view> families;
  for (const MetricMapping& m : kMappings) {
    if (std::find(families.begin(), families.end(), m.family) == families.end()) {
      families.push_back(m.family);
    }
  }
  for (absl::string_view family : families) {
    for (const MetricMapping& m : kMappings) {
      if (m.family != family) continue;
      size_t index = static_cast<size_t>(m.statistic) - 1;
      uint64_t raw = index < snapshot.counters.size() ? snapshot.counters[index].value : 0;
      // Families without _total are gauges (the fast path's leases and arena bytes).
      out.Sample(m.family, absl::EndsWith(m.family, "_total") ? "counter" : "gauge", m.family_help,
                 Label(m.label, m.label_value), static_cast<double>(raw) / m.divisor);
    }
  }
}

void Stores(const CacheSnapshot& snapshot, Exposition& out) {
  struct Gauge {
    absl::string_view family, help;
    uint64_t StoreSnapshot::*field;
  };
  static constexpr Gauge kGauges[] = {
      {"kcache_store_kernels", "Kernel records in the store.", &StoreSnapshot::kernels},
      {"kcache_store_artifacts", "Artifacts in the store.", &StoreSnapshot::artifacts},
      {"kcache_store_artifact_bytes", "Payload bytes of the store's artifacts.",
       &StoreSnapshot::artifact_bytes},
      {"kcache_store_disk_bytes", "Bytes of the store's files on disk.",
       &StoreSnapshot::disk_bytes},
      {"kcache_store_checksum_failures", "Corrupt entries the store found since it was opened.",
       &StoreSnapshot::checksum_failures},
  };
  auto labels = [](const StoreSnapshot& s) {
    return Join(Label("store", s.path),
                Label("role", s.tier == CacheTier::kLocalStore ? "writable" : "baked"));
  };
  for (const Gauge& gauge : kGauges) {
    for (const StoreSnapshot& store : snapshot.stores) {
      out.Sample(gauge.family, "gauge", gauge.help, labels(store),
                 static_cast<double>(store.*gauge.field));
    }
  }
  for (const StoreSnapshot& store : snapshot.stores) {
    out.Sample("kcache_store_up", "gauge",
               "1 while the store tier answers, 0 while it is switched off after failures.",
               labels(store), store.available && store.stats_ok ? 1 : 0);
  }
}

void Histograms(const CacheSnapshot& snapshot, Exposition& out) {
  for (const HistogramValue& h : snapshot.histograms) {
    // "resolve.seconds" -> "kcache_resolve_duration_seconds" (Prometheus names the unit last).
    std::string family =
        absl::StrCat("kcache_", absl::StrReplaceAll(h.name, {{".seconds", "_duration_seconds"}}));
    std::string label = Label(h.label, h.label_value);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      double le = i < h.bounds.size() ? h.bounds[i] : INFINITY;
      out.Sample(family, "histogram", h.help, Join(label, Label("le", Number(le))),
                 static_cast<double>(cumulative), "_bucket");
    }
    out.Sample(family, "histogram", h.help, label, h.sum_seconds, "_sum");
    out.Sample(family, "histogram", h.help, label, static_cast<double>(h.count), "_count");
  }
}

}  // namespace

const MetricMapping& MetricMappingOf(Statistic statistic) {
  return kMappings[static_cast<size_t>(statistic) - 1];
}

std::string RenderMetrics(const CacheSnapshot& snapshot, const DaemonMetrics& daemon) {
  Exposition out;
  out.Sample("kcache_build_info", "gauge", "Always 1; the labels name the build and toolkit.",
             Join(Label("version", daemon.version), Label("toolkit", daemon.toolkit)), 1);
  out.Sample("kcache_start_time_seconds", "gauge", "When kcached started, seconds since the epoch.",
             "", static_cast<double>(daemon.start_time_unix));
  out.Sample("kcache_serving", "gauge", "1 while serving, 0 once shutting down.", "",
             daemon.serving ? 1 : 0);
  out.Sample("kcache_calls_in_flight", "gauge", "gRPC calls being answered now.", "",
             static_cast<double>(daemon.calls_in_flight));
  out.Sample("kcache_calls_in_flight_limit", "gauge",
             "Calls answered at once before more are refused (--max-calls-in-flight).", "",
             static_cast<double>(daemon.calls_in_flight_limit));
  out.Sample("kcache_queued_bytes", "gauge",
             "Payload bytes reserved by Resolve streams for their writes in flight.", "",
             static_cast<double>(daemon.queued_bytes));
  out.Sample("kcache_queued_bytes_limit", "gauge",
             "Payload bytes queued for clients before Resolves are refused (--queued-max-bytes).",
             "", static_cast<double>(daemon.queued_bytes_limit));
  for (auto [socket, failures] : {std::pair{"main", daemon.accept_failures_main},
                                  {"probe", daemon.accept_failures_probe},
                                  {"fast", daemon.accept_failures_fast},
                                  {"door", daemon.accept_failures_door}}) {
    out.Sample("kcache_accept_failures_total", "counter",
               absl::StrCat("Accepts put off for want of descriptors or memory: kcached keeps ",
                            kDescriptorHeadroom,
                            " descriptors free for itself, and the connection waits in the "
                            "backlog (raise the descriptor limit)."),
               Label("socket", socket), static_cast<double>(failures));
  }
  Counters(snapshot, out);
  out.Sample("kcache_memory_cache_bytes", "gauge", "Payload bytes in the memory cache.", "",
             static_cast<double>(snapshot.memory_bytes));
  out.Sample("kcache_memory_cache_entries", "gauge", "Entries in the memory cache.", "",
             static_cast<double>(snapshot.memory_entries));
  out.Sample("kcache_object_memory_bytes", "gauge",
             "Bytes of launchers' listings and objects held in memory (--object-memory-max-bytes).",
             "", static_cast<double>(daemon.object_memory_bytes));
  for (const UncachedOptionCount& counted : daemon.uncached_options) {
    out.Sample(
        "kcache_launcher_uncached_option_total", "counter",
        "Launcher commands run uncached, by reason and the option that decided it "
        "(at most --max-uncached-options options; the rest as \"(others)\").",
        Join(Label("reason", UncachedReasonName(counted.reason)), Label("option", counted.option)),
        static_cast<double>(counted.count));
  }
  Stores(snapshot, out);
  Histograms(snapshot, out);
  return out.Take();
}

}  // namespace kcache
