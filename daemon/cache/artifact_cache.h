// ArtifactCache: the one interface the daemon's front end sees. Resolves kernels for devices
// over the tiers (memory LRU -> writable store -> read-only baked stores -> compile), compiles
// each missing artifact once however many ask (single-flight), warms manifests, and keeps the
// statistics and the record of what workers asked for. The data it takes and gives
// (ResolveQuery, Served, CacheSnapshot, ...) is in daemon/cache/cache_types.h.
#ifndef KCACHE_DAEMON_CACHE_ARTIFACT_CACHE_H_
#define KCACHE_DAEMON_CACHE_ARTIFACT_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/artifact.h"
#include "core/manifest.h"
#include "daemon/cache/cache_types.h"
#include "daemon/cache/shared_tier_options.h"
#include "engine/warm/warm.h"

namespace kcache {

class Compiler;
class Statistics;
class Store;

struct CacheOptions {
  std::unique_ptr<Store> local;               // writable store; required
  std::vector<std::unique_ptr<Store>> baked;  // read-only stores baked into the image, in order
  // The loaded toolkits' compilers, any order; empty: serve only ("no toolkit" on a miss). A
  // miss compiles with the newest one the device's driver loads that supports its SM.
  std::vector<std::shared_ptr<Compiler>> compilers;
  // The daemon's counters (daemon/cache/statistics.h): its host owns them and hands them to
  // the cache and to the services that count their own doings (the fast path, the Redis
  // door, the object service). Null: the cache makes its own (tests).
  std::shared_ptr<Statistics> statistics;
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
  // Bounds of the SASS builds from PTX that loads sent (BuildFromPtx) waiting to run: in all,
  // and for one client. Past either a request is refused (ResourceExhausted) and counted.
  size_t ptx_build_queue = 32;
  size_t ptx_build_queue_per_client = 8;
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

// Thread-safe. Errors: NotFound with the reason (kernel unknown, below min arch, no toolkit,
// nothing servable and no compile allowed), InvalidArgument (a query naming none or several of
// spec/id/name, or an ambiguous id prefix; what a query holds is checked once, where it is
// made: CheckedQueryFromProto, daemon/service/wire_convert.h, checks sizes, options, arch range
// and device SM, and the compile worker checks a job's options again), Aborted (compile
// error; the NVRTC log is in the message and the kCompileLogPayload payload),
// DeadlineExceeded / ResourceExhausted (compile ran past its limits), Unavailable (every
// tier failed). A failing tier is switched off for a while and counted: it slows requests,
// never fails them while another tier or the compiler can answer.
class ArtifactCache {
 public:
  virtual ~ArtifactCache() = default;

  // A resolve up to the point where it would wait for a compile: the answer (counted), or,
  // when nothing stored serves without one, the compile it needs, decided and not yet run or
  // counted. A batch answers every stored kernel this way before it waits for a compile; the
  // request is looked up once either way.
  using Found = std::variant<absl::StatusOr<Served>, PendingCompile>;
  virtual Found Find(const ResolveQuery& query) = 0;
  // Runs the compile Find decided, serves its output (or the stored fall-back when the compile
  // fails for a reason other than a compile error), and counts the request.
  virtual absl::StatusOr<Served> Compile(PendingCompile pending) = 0;
  // Find, then Compile when it needs one.
  absl::StatusOr<Served> Resolve(const ResolveQuery& query);

  // The in-pod fast path's lookup: Resolve that never compiles (allow_compile is ignored) and
  // counts nothing yet. The caller commits it (CommitPeek) when
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

  // Queues the SASS for request.device built from request.ptx (docs/ptx-libraries.md, "Built
  // for the next pod"): built in the background with the newest toolkit that supports the SM
  // and whose output the device's driver loads, with the default options (what `kcache warm
  // --library` builds), and stored under its PTX module id, where the next load finds it.
  // Answers at once, before anything is built. Errors (each counted ptx_builds.refused, except
  // a full queue): FailedPrecondition when this kcached compiles nothing sent by clients (no
  // toolkit, --no-toolkit, compile workers not sandboxed); InvalidArgument for text that is not
  // PTX or whose target cannot run on the device's SM; NotFound when no loaded toolkit supports
  // the SM; ResourceExhausted when the queue, or this client's share of it, is full (counted
  // ptx_builds.dropped). The build itself is counted built, held (stored meanwhile) or failed
  // (PTX that nvJitLink refuses: logged).
  virtual absl::StatusOr<PtxBuildQueued> BuildFromPtx(const PtxBuildRequest& request) = 0;

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
