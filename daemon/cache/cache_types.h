// The plain data the artifact cache and its callers exchange: a resolve's query and answer,
// the counts it holds for its caller, and what snapshots, listings and the start-up warm
// report. The interface itself is daemon/cache/artifact_cache.h.
#ifndef KCACHE_DAEMON_CACHE_CACHE_TYPES_H_
#define KCACHE_DAEMON_CACHE_CACHE_TYPES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/answer.h"
#include "core/artifact.h"
#include "core/compat.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "daemon/cache/histogram.h"

namespace kcache {

class CompileWatch;
enum class Statistic : int;  // daemon/cache/statistics.h (which includes this header)

// Numbered and stable: sent on the wire (kcache.v1.Tier).
enum class CacheTier : int {
  kMemory = 1,
  kLocalStore = 2,
  kBakedStore = 3,
  kCompile = 4,
  kShared = 5,  // the shared tier (Redis Cluster), between the baked stores and a compile
};
absl::string_view CacheTierName(CacheTier tier);  // "memory", "local_store", ...

// What a worker asks for: exactly one of `record` (the spec it sent), `id`, `name`.
struct ResolveQuery {
  // The spec sent, as the daemon's edge converted it (RecordFromProto,
  // daemon/service/wire_convert.h): its id is this daemon's ComputeKernelId of it, computed there
  // once per request (a sender's id is never trusted), and the cache takes it as is. Shared, never
  // copied.
  std::shared_ptr<const KernelRecord> record;
  std::optional<KernelId> id;
  std::string name;
  Device device;
  bool allow_compile = true;
  bool ptx_now = false;  // ResolvePolicy::ptx_now: take stored PTX now, compile in the background
  std::string client;    // for logs, and the compile queue's fairness (CompileDemand::client)
  // True while the caller still waits (its call is not cancelled); a compile it alone waits
  // for leaves the queue when it turns false. Null: always.
  std::function<bool()> still_wanted;
  // Called once, on the thread that runs the compile (ArtifactCache::Compile), when the answer
  // is about to wait for it (here or by another daemon of the fleet): the gRPC call then tells
  // its client (ResolveProgress). Null: nobody is told.
  std::function<void()> waits_for_compile;
  // When the answer waits for a compile: pointed at where that compile is (queued, compiling,
  // in the shared tier), for the progress the call sends its client. Borrowed: must outlive
  // the compile (Resolve, or Compile of what Find left pending). Null: nobody reads it.
  CompileWatch* compile_watch = nullptr;
};

// An answer as the daemon serves it: with the tier it came from.
struct Served : Answer {
  CacheTier tier = CacheTier::kMemory;
};

// A resolve that needs a compile, decided (what to compile, with which toolkit, what stored
// answer to fall back on) and not yet run: what ArtifactCache::Find answers instead of waiting
// for the compile. ArtifactCache::Compile runs it, once, and counts the request then; one
// dropped unrun (its caller gave up) is not counted. Move-only; its parts are the cache's.
class PendingCompile {
 public:
  struct State;  // daemon/cache/artifact_cache.cc
  explicit PendingCompile(std::unique_ptr<State> state);
  PendingCompile(PendingCompile&&) noexcept;
  PendingCompile& operator=(PendingCompile&&) noexcept;
  ~PendingCompile();
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
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

// SASS to build from PTX a load sent (ArtifactCache::BuildFromPtx): what libkcache-cuda.so asks
// for when a load found none, so that the next pod's load is served.
struct PtxBuildRequest {
  std::string ptx;     // the module's text; read up to its first NUL, as the driver reads it
  Device device;       // the GPU it was loaded on (a valid SM): the sm_ target built
  std::string client;  // the name the client gave itself ("" for none): logs only
  // Who asked, as the kernel vouches for it (daemon/service/peer_identity.h Peer::account:
  // "uid 1000"): the queue's per-client bound is keyed on it, never on the name. "": the name.
  std::string peer;
};

// What became of it.
struct PtxBuildQueued {
  enum class State {
    kQueued,         // queued; built in the background and stored
    kAlreadyQueued,  // the same (module, target) waits in the queue already
    kHeld,           // a store tier holds that SASS already: nothing to build
  };
  // fatbin::PtxModuleId of the PTX with no JIT options and the default compile options: the
  // kernel id under which a load looks the SASS up.
  KernelId module;
  Target target;  // the sm_ target built (fatbin::SassTargetFor the PTX's target and the GPU)
  State state = State::kQueued;
};

// What the start-up warm read (daemon/cache/startup_warm.h).
struct StartupWarmResult {
  uint64_t artifacts = 0;  // read, verified and handed on
  uint64_t bytes = 0;      // their payload bytes
  // Answers remembered in the memory tier: for each cubin read, what a store hit serves its
  // SM with an unknown driver (carried to known drivers: daemon/cache/unknown_driver.h).
  uint64_t memory_entries = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_CACHE_TYPES_H_
