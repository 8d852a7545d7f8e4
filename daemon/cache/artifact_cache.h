// ArtifactCache: the one interface the daemon's front end sees. Resolves kernels for devices
// over the tiers (memory LRU -> writable store -> read-only baked stores -> compile), compiles
// each missing artifact once however many ask (single-flight), warms manifests, and keeps the
// statistics and the record of what workers asked for.
#ifndef KCACHE_DAEMON_CACHE_ARTIFACT_CACHE_H_
#define KCACHE_DAEMON_CACHE_ARTIFACT_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/artifact.h"
#include "core/compiler_command.h"
#include "core/kernel_spec.h"
#include "core/manifest.h"
#include "daemon/cache/histogram.h"
#include "daemon/cache/shared_tier_options.h"
#include "engine/resolve/decide.h"
#include "engine/warm/warm.h"

namespace kcache {

class Compiler;
class CompileWatch;
class SharedTier;
class Store;

// Numbered and stable: sent on the wire (kcache.v1.Tier).
enum class CacheTier : int {
  kMemory = 1,
  kLocalStore = 2,
  kBakedStore = 3,
  kCompile = 4,
  kShared = 5,  // the shared tier (Redis Cluster), between the baked stores and a compile
};
absl::string_view CacheTierName(CacheTier tier);  // "memory", "local_store", ...

struct CacheOptions {
  std::unique_ptr<Store> local;               // writable store; required
  std::vector<std::unique_ptr<Store>> baked;  // read-only stores baked into the image, in order
  // The loaded toolkits' compilers, any order; empty: serve only ("no toolkit" on a miss). A
  // miss compiles with the newest one the device's driver loads that supports its SM.
  std::vector<std::shared_ptr<Compiler>> compilers;
  // False: never compile (kcached --no-toolkit); a miss answers kCompileNotAllowed.
  bool compile_allowed = true;
  // False: compile only kernels whose record a baked store holds (the image's own sources);
  // a miss of any other kernel answers kCompileNotAllowed, and Warm is refused. For compile
  // workers that cannot be sandboxed (kcached without --allow-unsandboxed-compiles).
  bool compile_client_sources = true;
  // A (kernel, target) whose compile a limit stopped is not compiled again for this long.
  absl::Duration compile_limit_backoff = absl::Minutes(10);
  // Bound of the compiles queued to run in the background (for ptx_now resolves); past it a
  // PTX answer is served without queueing its SASS compile (counted).
  size_t background_queue = 64;
  uint64_t memory_bytes = 256ull << 20;  // bound of the memory LRU (payload bytes)
  // Bound of the baked-store hits waiting to be copied into the writable store (payload
  // bytes; daemon/cache/write_behind.h). Past it a copy is dropped and counted.
  uint64_t write_back_queue_bytes = 64ull << 20;
  // A store tier whose call fails (an error other than NotFound) is skipped for this long,
  // doubling each time it fails again after coming back, up to the max; a success resets it.
  absl::Duration tier_off_initial = absl::Seconds(5);
  absl::Duration tier_off_max = absl::Minutes(1);
  // The shared tier (Redis Cluster) looked up after the baked stores and before a compile,
  // and written with what this daemon compiles; none when unset. NewArtifactCache creates it
  // (it counts into the cache's statistics).
  std::optional<SharedTierOptions> shared;
};

struct Served;
enum class Statistic : int;  // daemon/cache/statistics.h (which includes this header)

// What a worker asks for: exactly one of `spec`, `id`, `name`.
struct ResolveQuery {
  std::optional<KernelRecord> spec;  // id recomputed from spec.spec by the cache (never trusted)
  std::optional<KernelId> id;
  std::string name;
  Device device;
  bool allow_compile = true;
  bool ptx_now = false;  // ResolvePolicy::ptx_now: take stored PTX now, compile in the background
  std::string client;    // for logs, and the compile queue's fairness (CompileDemand::client)
  // True while the caller still waits (its call is not cancelled); a compile it alone waits
  // for leaves the queue when it turns false. Null: always.
  std::function<bool()> still_wanted;
  // True: when the answer needs a compile (nothing stored that the serving rules take without
  // one), return CompileDeferredStatus() at once instead of compiling, without counting the
  // request; the caller asks again with it false when it is ready to wait. A batch uses it to
  // answer every stored kernel before it waits for the first compile.
  bool defer_compile = false;
  // Called once, on the calling thread, when the answer is about to wait for a compile (here
  // or by another daemon of the fleet): the gRPC call then tells its client (ResolveProgress).
  // Null: nobody is told.
  std::function<void()> waits_for_compile;
  // When the answer waits for a compile: pointed at where that compile is (queued, compiling,
  // in the shared tier), for the progress the call sends its client. Borrowed: must outlive
  // Resolve. Null: nobody reads it.
  CompileWatch* compile_watch = nullptr;
};

// ResolveQuery::defer_compile's answer, and its test.
absl::Status CompileDeferredStatus();
bool IsCompileDeferred(const absl::Status& status);

struct Served {
  std::shared_ptr<const Artifact> artifact;  // immutable; shared with the memory tier
  ServeRule rule = ServeRule::kExactSass;
  std::string reason;
  CacheTier tier = CacheTier::kMemory;
  bool needs_jit() const { return rule == ServeRule::kPtxJit; }
};

// The statistics one resolve adds (a hit's tier, rule and bytes; a miss's reason; a malformed
// query), held until its caller commits them with the request's count and latency.
struct ResolveTally {
  absl::InlinedVector<std::pair<Statistic, uint64_t>, 6> adds;
  void Add(Statistic statistic, uint64_t n = 1) { adds.emplace_back(statistic, n); }
};

struct CounterValue {
  std::string name;  // "resolve.hit.memory", "miss.no_toolkit", ...
  std::string help;  // one line of text
  uint64_t value = 0;
};

// One store tier as a snapshot sees it.
struct StoreSnapshot {
  std::string path;
  CacheTier tier = CacheTier::kLocalStore;  // kLocalStore (writable) or kBakedStore
  bool available = true;                    // false while the tier is switched off after failures
  bool stats_ok = false;  // false when its statistics could not be read (the counts are 0)
  uint64_t kernels = 0;
  uint64_t artifacts = 0;
  uint64_t artifact_bytes = 0;  // payload bytes (uncompressed)
  uint64_t disk_bytes = 0;
  uint64_t checksum_failures = 0;  // since open
};

struct CacheSnapshot {
  std::vector<CounterValue> counters;      // numbered, append-only (daemon/cache/statistics.h)
  std::vector<HistogramValue> histograms;  // latencies (Statistics::Histograms)
  std::vector<StoreSnapshot> stores;       // the writable store first, then the baked ones
  const StoreSnapshot& writable() const { return stores.front(); }  // there is always one
  uint64_t memory_bytes = 0;
  uint64_t memory_entries = 0;
  std::vector<std::string> toolkits;  // identity ids of the compiler's toolkit(s)
};

struct ListedArtifactInfo {
  ArtifactMeta meta;
  CacheTier tier = CacheTier::kLocalStore;
};
struct ListedKernelInfo {
  KernelRecord record;
  std::vector<ListedArtifactInfo> artifacts;
};

// A kernel workers asked for, with the devices they asked for it on.
struct SeenKernel {
  KernelRecord record;
  std::vector<Sm> devices;
  uint64_t requests = 0;
};

// What the start-up warm read (daemon/cache/startup_warm.h).
struct StartupWarmResult {
  uint64_t artifacts = 0;  // read, verified and handed on
  uint64_t bytes = 0;      // their payload bytes
  // Answers remembered in the memory tier: for each cubin read, what a store hit serves its
  // SM with an unknown driver (carried to known drivers: daemon/cache/unknown_driver.h).
  uint64_t memory_entries = 0;
};

// Thread-safe. Errors: NotFound with the reason (kernel unknown, below min arch, no toolkit,
// nothing servable and no compile allowed), InvalidArgument (bad query: none or several of
// spec/id/name, a spec without source or with min_arch above max_arch, a device SM out of
// range; compile options are the caller's to validate, at its edge: the front end does, and
// the compile worker checks again), Aborted (compile
// error; the NVRTC log is in the message and the kCompileLogPayload payload),
// DeadlineExceeded / ResourceExhausted (compile ran past its limits), Unavailable (every
// tier failed). A failing tier is switched off for a while and counted: it slows requests,
// never fails them while another tier or the compiler can answer.
class ArtifactCache {
 public:
  virtual ~ArtifactCache() = default;

  virtual absl::StatusOr<Served> Resolve(const ResolveQuery& query) = 0;

  // The in-pod fast path's lookup: Resolve that never compiles (allow_compile and
  // defer_compile are ignored) and counts nothing yet. The caller commits it (CommitPeek) when
  // it sends the answer; one it leaves to gRPC (a miss, PTX that gRPC may compile, an answer
  // past its own bounds) is not committed, and the gRPC call that follows counts it: each
  // request is counted once, by whoever answers it.
  struct Peeked {
    absl::StatusOr<Served> served;
    ResolveTally tally;
    absl::Time start;
  };
  virtual Peeked Peek(ResolveQuery query) = 0;
  virtual void CommitPeek(const Peeked& peeked) = 0;

  // A Resolve the front end refused before asking (InvalidArgument: a malformed request),
  // `elapsed` after it arrived: counted as a request and as invalid (resolve.requests,
  // resolve.invalid) and timed under outcome "invalid", as the cache counts its own refusals.
  virtual void RecordRefused(absl::Duration elapsed) = 0;

  // A call the front end refused RESOURCE_EXHAUSTED because one of the daemon's bounds was
  // reached, before (kCallsInFlight) or after (kQueuedBytes) asking: counted
  // (calls.refused_busy, resolve.refused_queued_bytes).
  enum class Bound { kCallsInFlight, kQueuedBytes };
  virtual void RecordOverBound(Bound bound) = 0;

  // The in-pod fast path's counts (fast.* in daemon/cache/statistics.h); the gauges (leases
  // held, arena bytes) move by `delta`, which may be negative.
  enum class FastPathCount {
    kHit,
    kFallbackMiss,
    kFallbackArenaFull,
    kFallbackLeaseBound,
    kConnectionRefused,
    kBadMessage,
    kLeasesHeld,
    kArenaBytes,
  };
  virtual void RecordFastPath(FastPathCount count, int64_t delta) = 0;

  // The Redis door's counts (redis.* in daemon/cache/statistics.h); kConnections is a gauge
  // that moves by `delta`, which may be negative.
  enum class RedisDoorCount {
    kHit,
    kMiss,
    kBytesIn,
    kBytesOut,
    kSet,
    kRefusedValueTooBig,
    kRefusedNamespace,
    kRefusedCommand,
    kRefusedProtocol,
    kRefusedConnections,
    kRefusedBuffer,
    kIdleClosed,
    kStoreError,
    kConnections,
    kRefusedDriverTooOld,    // a cubin the connection's driver cannot load, answered as a miss
    kRefusedToolkitUnknown,  // a cubin whose toolkit cannot be read, answered as a miss
  };
  virtual void RecordRedisDoor(RedisDoorCount count, int64_t delta) = 0;

  // The compiler launchers' object service (daemon/service/object_cache_service.h) over the
  // same stores: a lookup, an object served or stored, a put refused; and the fleet tier's
  // hits, misses, puts, refusals and errors (objects.*; engine/objects/fleet_object_cache.h).
  enum class ObjectCount {
    kLookup,
    kServed,
    kStored,
    kPutRefused,
    kFleetHit,
    kFleetMiss,
    kFleetPut,
    kFleetRefused,
    kFleetError,
    kFleetWriteDropped
  };
  virtual void RecordObjects(ObjectCount count) = 0;
  // A launcher command that ran uncached (objects.uncached_<reason>); kNone counts nothing.
  virtual void RecordUncached(UncachedReason reason) = 0;

  // Warms into the writable store through the same compiler (and single-flight) as misses.
  virtual absl::StatusOr<WarmSummary> Warm(const Manifest& manifest, const WarmOptions& options,
                                           WarmObserver* observer) = 0;

  // The start-up warm over the store tiers (daemon/cache/startup_warm.h, WarmFromStores):
  // reads the most recently used artifacts up to `budget_bytes`, hands each to `each`, and
  // counts their bytes (startup.warmed_bytes). Run once, in the background, after the daemon
  // serves; `keep_going` false stops it (shutdown).
  virtual StartupWarmResult WarmAfterStart(
      uint64_t budget_bytes, const std::function<void(std::shared_ptr<const Artifact>)>& each,
      const std::function<bool()>& keep_going) = 0;

  // Every kernel known to any store, with its artifacts and where they live.
  virtual absl::StatusOr<std::vector<ListedKernelInfo>> List() = 0;

  // What workers asked for since start (for `kcache export-manifest`).
  virtual std::vector<SeenKernel> Seen() const = 0;

  // Counters, histograms, memory and store sizes. Reads every store's statistics (a walk of
  // its artifact index): meant for `kcache stat` and a metrics scrape, not for every request.
  virtual CacheSnapshot Snapshot() const = 0;
};

absl::StatusOr<std::unique_ptr<ArtifactCache>> NewArtifactCache(CacheOptions options);

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_ARTIFACT_CACHE_H_
