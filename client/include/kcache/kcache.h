// libkcache: what an inference worker links to get its compiled CUDA kernels from kcached.
//
//   kcache::client::ClientOptions options;             // unix:///run/kcache/kcache.sock
//   auto client = kcache::client::Client::Connect(options);   // lazy: never blocks
//   auto kernel = (*client)->Resolve(source, device);  // bytes + how it was served
//
// No gRPC or protobuf type appears here (the insides are behind a pimpl); failures are
// absl::Status values. The library fails open: every daemon call has a deadline, and when the
// daemon is away (unreachable, silent, UNAVAILABLE) a kernel given by source is compiled in
// this process with NVRTC (when `local_compile_fallback` is on). A kernel the daemon is
// compiling is waited for: the daemon keeps the call alive with progress messages. A circuit
// breaker stops the client waiting on a dead daemon for every kernel. docs/client.md has the whole
// story; device.h detects GPUs and loads modules; kcache_c.h is the C ABI over the same library.
#ifndef KCACHE_CLIENT_INCLUDE_KCACHE_KCACHE_H_
#define KCACHE_CLIENT_INCLUDE_KCACHE_KCACHE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kcache::client {

inline constexpr char kDefaultAddress[] = "unix:///run/kcache/kcache.sock";

// $KCACHE_ADDRESS when it is set and not empty (deploy/k8s sets it in the worker container),
// else kDefaultAddress. Read each time it is called.
std::string DefaultAddress();

// $KCACHE_STARTUP_GRACE when it is set and not empty ("5s", "500ms", "0", or seconds as a
// plain number; a value that is none of these gives -1 s, which Client::Connect refuses with
// a message naming the variable), else 5 s. Read each time it is called.
absl::Duration DefaultStartupGrace();

struct ClientOptions {
  // Where kcached listens: "unix:///run/kcache/kcache.sock", "unix:relative.sock",
  // "localhost:7071". A bare absolute path ("/run/kcache/kcache.sock") means a unix socket.
  // Default: DefaultAddress(), read when the options are made.
  std::string address = DefaultAddress();
  // How long a call waits without word from the daemon. Admin calls (Stat, List, ...): their
  // whole limit. Resolve and ResolveMany: the longest silence (no answer and no progress
  // message) for a kernel; a kernel the daemon is compiling is waited for as long as the
  // daemon keeps saying so, up to `wait_limit`; a daemon that falls silent is given up on and
  // the kernel compiled here (docs/client.md, "Deadlines"). Must be > 0.
  absl::Duration deadline = absl::Seconds(2);
  // When the daemon cannot answer, compile a kernel given by source in this process with
  // NVRTC (the toolkit is loaded once, on the first local compile).
  bool local_compile_fallback = true;
  // CUDA toolkit root for local compiles; "" = $CUDA_HOME, else /usr/local/cuda.
  std::string toolkit_root;
  // Consecutive daemon failures (unreachable, deadline, UNAVAILABLE, a broken stream) after
  // which the client stops calling the daemon for `breaker_cooldown`; then one request probes
  // it. 0 = never stop calling.
  int breaker_failures = 3;
  absl::Duration breaker_cooldown = absl::Seconds(10);
  // Sent with every request, for the daemon's logs and statistics (pod name, worker id).
  // "" = "pid-<pid>".
  std::string client_name;
  // Take kernels the daemon holds over the in-pod fast path (docs/client.md, "The fast
  // path"): a read-only view of the daemon's shared memory instead of a copy through gRPC.
  // Anything the fast path cannot serve goes over gRPC, silently.
  bool fast_path = true;
  // The daemon's fast-path socket; "" = the unix address's path + ".fast" (none for TCP).
  std::string fast_path_socket;
  // The longest a Resolve waits for a kernel in all, however much the daemon says it is
  // working on it; then DeadlineExceeded (not compiled here: the daemon is busy, not away).
  // 0 = the daemon's compile limit, which it states in its first progress message
  // (--compile-timeout-seconds), plus `deadline`.
  absl::Duration wait_limit = absl::ZeroDuration();
  // When kcached is not there yet (its socket missing or refusing: a sidecar still starting),
  // how long the first calls wait for it before compiling here. Spent once: the first contact
  // with the daemon, or the grace running out, ends it (docs/client.md, "Waiting for the
  // sidecar"). 0 = do not wait. Default: DefaultStartupGrace() ($KCACHE_STARTUP_GRACE, else 5 s).
  absl::Duration startup_grace = DefaultStartupGrace();
};

// What a kernel is made of. Two sources with equal source, headers, options and name
// expressions are the same kernel (the same kernel id); `name` is for display only.
struct KernelSource {
  std::string name;
  std::string source_name;  // the source's file name, for compile messages ("attention.cu")
  std::string source;       // CUDA C++ source text
  std::map<std::string, std::string> headers;  // include name -> content
  std::vector<std::string> options;            // NVRTC options (allowlisted; never -arch)
  std::vector<std::string> name_expressions;   // e.g. "softmax<float>", lowered on compile
  int min_arch = 0;                            // lowest SM as 75 / 89; 0 = no bound
  int max_arch = 0;                            // highest SM; 0 = no bound
  bool want_ltoir = false;                     // warm only: also build LTO-IR
};

// The GPU a kernel is for.
struct Device {
  int sm_major = 0;
  int sm_minor = 0;
  uint32_t driver_version = 0;  // cuDriverGetVersion, e.g. 13000; 0 = unknown

  int arch() const { return sm_major * 10 + sm_minor; }  // 89
  std::string ToString() const;                          // "8.9"
  // Parses "8.9", "sm_89" or "89".
  static absl::StatusOr<Device> Parse(absl::string_view sm, uint32_t driver_version = 0);
};

enum class ArtifactKind { kCubin = 1, kPtx = 2, kLtoir = 3 };
absl::string_view ArtifactKindName(ArtifactKind kind);  // "cubin", "ptx", "ltoir"

// Why the artifact may run on the device (docs/serving-rules.md); numbers as on the wire.
enum class ServeRule { kExactSass = 1, kCompatibleSass = 2, kPtxJit = 3, kCompiled = 4 };
absl::string_view ServeRuleName(ServeRule rule);  // "exact_sass", ..., "compiled"

// Where the bytes came from: one of the daemon's tiers, or a compile in this process.
enum class ServedFrom {
  kDaemonMemory = 1,
  kDaemonLocalStore = 2,
  kDaemonBakedStore = 3,
  kDaemonCompile = 4,
  kLocalCompile = 5,
  kDaemonUnknownTier = 6,  // a daemon that did not say
  kDaemonShared = 7,       // the daemon's shared tier (another daemon of the fleet compiled it)
};
// "daemon:memory", "daemon:local_store", "daemon:baked_store", "daemon:compile",
// "local_compile", "daemon".
absl::string_view ServedFromName(ServedFrom from);

struct FetchedKernel {
  // The cubin, PTX (the driver JITs it) or LTO-IR, checksum verified. Read it through data():
  // a kernel served over the in-pod fast path leaves `bytes` empty and holds a read-only view
  // of the daemon's shared memory instead (`view`, kept valid by `view_owner`).
  std::string bytes;
  std::shared_ptr<const void> view_owner;
  absl::string_view view;
  ArtifactKind kind = ArtifactKind::kCubin;
  std::string target;     // "sm_89", "compute_86", "sm_90a"
  std::string kernel_id;  // 64 hex digits
  std::string kernel_name;
  std::string toolkit;  // "nvrtc-13.0+9ca007cdb201"
  ServeRule rule = ServeRule::kExactSass;
  std::string reason;      // one line: why this artifact
  bool needs_jit = false;  // PTX: the driver must JIT it when loading
  std::vector<std::pair<std::string, std::string>> lowered_names;  // expression -> mangled
  std::string compile_log;
  uint32_t min_driver = 0;  // oldest driver that loads it
  ServedFrom served_from = ServedFrom::kDaemonUnknownTier;
  int64_t micros = 0;  // wall time of the call that returned it

  // The artifact's bytes, wherever they live; valid while this FetchedKernel (or a copy) is.
  absl::string_view data() const { return view_owner ? view : absl::string_view(bytes); }
  bool from_daemon() const { return served_from != ServedFrom::kLocalCompile; }
  // The lowered (mangled) name of `name_expression`, or "" if it has none.
  std::string LoweredName(absl::string_view name_expression) const;
};

// One kernel of a batch (Client::ResolveMany): by source (converts from a KernelSource), or a
// kernel the daemon's stores know, by id or by name.
struct KernelRef {
  enum class By { kSource, kId, kName };
  KernelRef(KernelSource source)  // NOLINT(google-explicit-constructor): a source is a ref
      : by(By::kSource), source(std::move(source)) {}
  static KernelRef Id(std::string hex_id) { return KernelRef(By::kId, std::move(hex_id)); }
  static KernelRef Name(std::string name) { return KernelRef(By::kName, std::move(name)); }

  By by;
  KernelSource source;  // kSource
  std::string key;      // kId: 64 hex digits; kName: the name

 private:
  KernelRef(By b, std::string k) : by(b), key(std::move(k)) {}
};

// Per-call settings; the defaults are the client's.
// Where the daemon is with a kernel it compiles for a call (CallOptions::on_progress;
// docs/client.md, "Progress").
struct CompileProgress {
  enum class Stage {
    kUnknown = 0,    // not said (yet), or a daemon too old to say
    kQueued = 1,     // waiting for a free compile worker
    kCompiling = 2,  // being compiled
    kShared = 3,     // looked for in the shared tier, or compiled by another daemon of the fleet
  };
  size_t index = 0;  // the kernel's index in the ResolveMany batch (0 for a single Resolve)
  Stage stage = Stage::kUnknown;
  uint32_t queued_behind = 0;  // kQueued: compiles running, plus those ahead of it queued
  absl::Duration elapsed = absl::ZeroDuration();        // since the daemon accepted the call
  absl::Duration compiling_for = absl::ZeroDuration();  // kCompiling: since it started
  // How long a compile of the same kernel took there before (another target or toolkit);
  // 0: not known.
  absl::Duration expected = absl::ZeroDuration();
};

struct CallOptions {
  absl::Duration deadline = absl::ZeroDuration();  // 0 = ClientOptions::deadline (its meaning)
  bool allow_daemon_compile = true;                // false: the daemon answers NOT_FOUND on a miss
  // True: when the daemon holds only PTX for the device and could compile its SASS, take the
  // PTX now (the driver JITs it) while the daemon compiles the SASS in the background for the
  // next caller. False (default): wait for the SASS, so this worker never pays a JIT.
  bool ptx_now = false;
  // Called with each progress the daemon sends while it compiles for this call (about every
  // 0.5 s per waiting kernel). It runs on the thread reading the daemon's answers — the
  // calling thread, inside Resolve or ResolveMany; for ResolveForGpus, one thread per device
  // at once — so it must be quick and must not call this Client. Empty: none.
  std::function<void(const CompileProgress&)> on_progress;
};

// The daemon's statistics (kcache stat --server).
struct DaemonCounter {
  std::string name;  // "resolve.hit.memory", "miss.no_toolkit", ...
  std::string help;
  uint64_t value = 0;
};
struct DaemonStats {
  std::vector<DaemonCounter> counters;  // the daemon's numbered list, in its order
  uint64_t store_artifacts = 0;
  uint64_t store_bytes = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_entries = 0;
  std::vector<std::string> toolkits;
  uint64_t uptime_seconds = 0;
  // The daemon's Redis door for torch.compile (docs/torch-compile.md): "unix:///path" or
  // "HOST:PORT"; empty when it has none (or is older than this field).
  std::string redis_door;
  // Launcher commands run uncached, by reason and the option that decided it, most counted
  // first (empty from a kcached older than this field).
  struct UncachedOption {
    std::string reason, option;
    uint64_t count = 0;
  };
  std::vector<UncachedOption> uncached_options;
  uint64_t Counter(absl::string_view name) const;  // 0 when absent
};

struct ListedArtifact {
  ArtifactKind kind = ArtifactKind::kCubin;
  std::string target;
  std::string toolkit;
  uint64_t size = 0;
  ServedFrom tier = ServedFrom::kDaemonUnknownTier;
};
struct ListedKernel {
  std::string kernel_id;  // 64 hex digits
  std::string name;
  int min_arch = 0;
  int max_arch = 0;
  std::vector<ListedArtifact> artifacts;
};

struct ExportedManifest {
  std::string yaml;  // self-contained: `kcache warm` reads it as is
  uint32_t kernels = 0;
};

// Warm through the daemon: one event per finished (kernel x target) job, then totals.
struct WarmJobEvent {
  std::string kernel_name;
  std::string target;
  std::string outcome;  // "built", "cached", "skipped", "failed"
  uint64_t micros = 0;
  uint64_t bytes = 0;
  std::vector<std::string> kinds;
  std::string message;  // skip reason, or the error with the full NVRTC log
  uint32_t done = 0;
  uint32_t total = 0;
};
struct WarmTotals {
  uint32_t built = 0, cached = 0, skipped = 0, failed = 0;
  uint64_t wall_micros = 0;
};

enum class BreakerState { kClosed, kOpen, kHalfOpen };
absl::string_view BreakerStateName(BreakerState state);  // "closed", "open", "half_open"

// The kernels of a kcache manifest (docs/manifest.md; variants are kernels of their own), as
// sources, in the manifest's order: a YAML manifest, or a baked one (BakeManifest), told
// apart by the file's first bytes. Errors name the file, line and field (InvalidArgument) or
// the missing file (NotFound).
absl::StatusOr<std::vector<KernelSource>> LoadManifestKernels(const std::string& path);

// Writes the kernels of the YAML manifest at `manifest_path` to `out_path` (replaced whole) as
// a baked manifest (docs/manifest.md, "Baked manifests"): one file with every source and
// header inline, which LoadManifestKernels reads with no YAML parse and no file but that one.
// It holds the kernels as they were when baked: bake again when the manifest or a source
// changes. Errors: LoadManifest's; PermissionDenied when `out_path` cannot be written.
absl::Status BakeManifest(const std::string& manifest_path, const std::string& out_path);

// Thread-safe: one Client serves every thread of a worker.
class Client {
 public:
  // Checks the options and starts connecting in the background; never waits for the daemon
  // (a call made before the connection is up waits for it within its deadline). With the fast
  // path on a unix socket, its connection is made now (the daemon's hello is read by the first
  // call, so create the client before reading a manifest) and the gRPC connection is left to
  // the first call that needs it.
  // InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The kernel for `device`: from the daemon (which compiles a miss once for every worker),
  // else, when the daemon is away (or the circuit is open, or the daemon answers NOT_FOUND
  // because it cannot compile) and local_compile_fallback is on, compiled here. Errors:
  // NotFound (the device is outside the kernel's min/max arch, or the daemon has nothing),
  // InvalidArgument (a refused option), Aborted (compile error, NVRTC log in the message),
  // Unavailable / DeadlineExceeded / DataLoss (the daemon failed and there was no fallback).
  absl::StatusOr<FetchedKernel> Resolve(const KernelSource& source, const Device& device,
                                        const CallOptions& call = {});
  // Daemon only (there is no source to compile): a kernel the daemon's stores know, by its
  // 64-digit hex id or by name. While the circuit is open these fail at once with Unavailable.
  absl::StatusOr<FetchedKernel> ResolveById(absl::string_view hex_id, const Device& device,
                                            const CallOptions& call = {});
  absl::StatusOr<FetchedKernel> ResolveByName(absl::string_view name, const Device& device,
                                              const CallOptions& call = {});

  // Several kernels in one call: `on_result(index, result)` runs once per kernel of
  // `kernels`, on the calling thread, as each is ready: those the daemon holds first, then
  // its compiles as they finish. Returns when every kernel has had its result. Each result is
  // what Resolve / ResolveById / ResolveByName would give for that kernel alone, fail-open
  // included (kernels by source are compiled here when the daemon is away). The deadline holds
  // for each kernel on its own, as for Resolve: one the daemon compiles is waited for while it
  // says so.
  using ResultCallback = std::function<void(size_t index, absl::StatusOr<FetchedKernel> result)>;
  void ResolveMany(const std::vector<KernelRef>& kernels, const Device& device,
                   const ResultCallback& on_result, const CallOptions& call = {});
  // The same, returning the results in the order of `kernels`.
  std::vector<absl::StatusOr<FetchedKernel>> ResolveMany(const std::vector<KernelRef>& kernels,
                                                         const Device& device,
                                                         const CallOptions& call = {});

  // Administration (the kcache tool): straight to the daemon, within the deadline, not
  // through the circuit breaker.
  absl::StatusOr<DaemonStats> Stat(const CallOptions& call = {});
  absl::StatusOr<std::vector<ListedKernel>> List(const CallOptions& call = {});
  absl::StatusOr<ExportedManifest> ExportManifest(const CallOptions& call = {});
  // Has the daemon compile `kernels` for `targets` ("7.5", "sm_90a", "compute_90") into its
  // writable store; `on_job` sees each finished job as the daemon streams it. `deadline` 0 =
  // no limit (a warm may take minutes). jobs 0 = the daemon's choice.
  absl::StatusOr<WarmTotals> Warm(const std::vector<KernelSource>& kernels,
                                  const std::vector<std::string>& targets, int jobs,
                                  absl::Duration deadline,
                                  const std::function<void(const WarmJobEvent&)>& on_job);

  BreakerState breaker_state() const;
  const ClientOptions& options() const;

 private:
  struct Impl;  // client/lib/client.cc
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Compiles kernels in this process with NVRTC, as workers do without a cache (and as the
// client does when the daemon is away). Thread-safe; the toolkit is loaded on the first
// Compile (a failure to load is kept and returned by every later call).
class LocalCompiler {
 public:
  explicit LocalCompiler(std::string toolkit_root = "");  // "" = $CUDA_HOME or /usr/local/cuda
  ~LocalCompiler();
  LocalCompiler(const LocalCompiler&) = delete;
  LocalCompiler& operator=(const LocalCompiler&) = delete;

  // A cubin for the device's SM when the toolkit supports it, else PTX for the highest
  // supported arch below it (needs_jit). NotFound when the device is outside the source's
  // min/max arch or below every supported arch; FailedPrecondition when no toolkit loads;
  // InvalidArgument / Aborted as Client::Resolve. served_from is kLocalCompile.
  absl::StatusOr<FetchedKernel> Compile(const KernelSource& source, const Device& device);

  // The 64-digit hex kernel id of `source` (what the daemon keys it by).
  static std::string KernelIdOf(const KernelSource& source);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_INCLUDE_KCACHE_KCACHE_H_
