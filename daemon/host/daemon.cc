#include "daemon/host/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "core/process_identity.h"
#include "core/version.h"
#include "daemon/cache/artifact_cache.h"
#include "daemon/cache/statistics.h"
#include "daemon/host/client_object_sharing.h"
#include "daemon/host/listen_socket.h"
#include "daemon/host/metrics.h"
#include "daemon/host/object_turns.h"
#include "daemon/host/probe_listener.h"
#include "daemon/host/protobuf_log.h"
#include "daemon/host/start_compilers.h"
#include "daemon/host/store_event_log.h"
#include "daemon/host/unix_grpc_listener.h"
#include "daemon/objects/memo_object_cache.h"
#include "daemon/objects/tiered_object_cache.h"
#include "daemon/service/blocking_pool.h"
#include "daemon/service/fast_path_server.h"
#include "daemon/service/kernel_cache_service.h"
#include "daemon/service/object_cache_service.h"
#include "engine/compile/toolkit.h"
#include "engine/shared/shared_entry.h"
#include "engine/store/store.h"

namespace kcache {
namespace {

// How much of the start-up warm kcached waits for before it is ready (most recently used
// first; docs/kcached.md, "Start-up"): a node's kernels, not a whole large store.
constexpr uint64_t kWarmBeforeReadyBytes = uint64_t{16} << 20;

constexpr char kServiceName[] = "kcache.v1.KernelCache";

std::string DescribeStore(Store& store) {
  absl::StatusOr<StoreStats> stats = store.Stats();
  if (!stats.ok()) return absl::StrCat(store.path(), " (stats unavailable)");
  return absl::StrCat(
      store.path(), " (", stats->kernels, " kernels, ", stats->artifacts, " artifacts, ",
      stats->artifact_bytes >> 20, " MiB",
      stats->max_bytes > 0 ? absl::StrCat(" of ", stats->max_bytes >> 20, " MiB") : "",
      stats->read_only_full ? "; read-only: the disk is full" : "", ")");
}

// How a client reaches the door kcached listens on: "unix:///path", or the TCP address with
// the port bound (the one picked for port 0) and localhost as 127.0.0.1.
std::string DoorAddressForClients(const std::string& listen, int port, const std::string& path) {
  if (!path.empty()) return absl::StrCat("unix://", path);
  std::string host = listen.substr(0, listen.rfind(':'));
  return absl::StrCat(host == "localhost" ? "127.0.0.1" : host, ":", port);
}

class DaemonImpl final : public Daemon {
 public:
  explicit DaemonImpl(DaemonOptions options)
      : options_(std::move(options)),
        tracker_(CallLimits{options_.max_calls_in_flight, options_.max_queued_bytes}) {}
  ~DaemonImpl() override { Shutdown(); }

  absl::Status Init() {
    RouteProtobufLog(statistics_);
    // The socket first: a live daemon there is the likeliest reason the store is locked too.
    if (absl::Status s = PrepareListenAddress(); !s.ok()) return s;
    // The toolkits load and the first compile worker starts while the stores open: together
    // they are most of the start-up, and neither needs the other.
    std::string toolkit_summary;
    std::future<absl::Status> compilers = std::async(std::launch::async, [&] {
      return StartCompilers(options_, &pools_, &service_options_, &toolkit_summary);
    });
    CacheOptions cache_options;
    absl::Status opened = OpenStores(&cache_options);
    absl::Status started = compilers.get();
    if (!opened.ok()) return opened;
    if (!started.ok()) return started;
    if (absl::Status s = OpenObjectCache(cache_options); !s.ok()) return s;
    service_options_.default_warm_jobs = options_.compile.workers;
    if (absl::Status s = SetCacheOptions(&cache_options); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<ArtifactCache>> cache =
        NewArtifactCache(std::move(cache_options));
    if (!cache.ok()) return cache.status();
    cache_ = *std::move(cache);
    object_service_ = std::make_unique<ObjectCacheService>(object_cache_.get(), object_turns_.get(),
                                                           options_.objects, statistics_.get(),
                                                           &peers_, HostName());
    pool_ = std::make_unique<BlockingPool>(options_.max_request_threads);

    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    // The other doors open first: a client (or a readiness check) that the main socket answers
    // finds the fast path and the Redis door listening too.
    StartFastPath();
    // The start-up warm first, waited for a moment: the first worker, which comes once kcached
    // is ready, then finds its kernels in memory and in the arena. Waited for until it is done
    // or has read its first kWarmBeforeReadyBytes (the most recently used), at most
    // --warm-before-ready-ms; it goes on in the background.
    warm_ = std::thread([this] { WarmAfterStart(); });
    warmed_.WaitForNotificationWithTimeout(options_.warm_before_ready);
    if (absl::Status s = StartRedisDoor(); !s.ok()) return s;
    // After the door: Stat tells clients where it listens.
    service_ = std::make_unique<KernelCacheService>(
        ServiceParts{cache_.get(), statistics_.get(), pool_.get(), &tracker_, &peers_}, &ticker_,
        service_options_);
    // The probe port before the main socket, answering NOT_SERVING until that listens: a
    // client that finds the main socket finds the probe port open, and a readiness check is
    // never early.
    if (absl::Status s = StartProbeServer(); !s.ok()) return s;
    if (absl::Status s = StartMainServer(); !s.ok()) return s;
    serving_ = true;
    if (probe_server_) probe_server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);
    spdlog::info(
        "kcached serving on {} (socket mode {:04o}){}; {}; memory cache {} MiB; at most {} "
        "calls in flight and {} MiB queued for clients",
        options_.listen, static_cast<unsigned>(options_.socket_mode),
        probe_port_ ? absl::StrCat(", probes on ", options_.probe_address, ":", probe_port_) : "",
        toolkit_summary, options_.memory_cache_bytes >> 20, options_.max_calls_in_flight,
        options_.max_queued_bytes >> 20);
    return absl::OkStatus();
  }

  // The artifact cache's options from the flags, with the compilers started and the shared
  // tier's keys loaded (the stores are set by OpenStores).
  absl::Status SetCacheOptions(CacheOptions* cache_options) {
    cache_options->compilers.assign(pools_.begin(), pools_.end());
    cache_options->compile_allowed = !options_.no_toolkit;
    cache_options->compile_limit_backoff = options_.compile_limit_backoff;
    cache_options->compile_client_sources =
        options_.allow_unsandboxed_compiles ||
        std::all_of(pools_.begin(), pools_.end(), [](const auto& p) { return p->sandboxed(); });
    cache_options->memory_bytes = options_.memory_cache_bytes;
    cache_options->statistics = statistics_;
    statistics_->uncached_options().SetLimit(options_.max_uncached_options);
    cache_options->write_back_queue_bytes = options_.write_back_queue_bytes;
    cache_options->ptx_build_queue = options_.ptx_build_queue;
    cache_options->ptx_build_queue_per_client = options_.ptx_build_queue_per_client;
    if (!options_.shared.empty()) {
      absl::StatusOr<SharedKeys> keys =
          SharedKeys::Load(options_.shared_key_file, options_.shared_key_file_second);
      if (!keys.ok()) return keys.status();
      SharedTierOptions shared;
      shared.url = options_.shared;
      shared.keys = *std::move(keys);
      shared.budget = options_.shared_budget;
      shared.max_value_bytes = options_.shared_max_bytes;
      shared.lease_ttl = options_.shared_lease;
      shared.wait = options_.shared_wait;
      cache_options->shared = std::move(shared);
      spdlog::info("shared tier: {} (budget {}, entries up to {} bytes)", options_.shared,
                   absl::FormatDuration(options_.shared_budget), options_.shared_max_bytes);
    }
    return absl::OkStatus();
  }

  bool Shutdown() override {
    if (shut_down_) return clean_;
    shut_down_ = true;
    if (server_ == nullptr) {  // Init stopped before the main server: close what it opened
      StopProbe();
      return clean_ = CloseCache();
    }
    spdlog::info("shutting down: {} calls in flight, grace {} s", tracker_.active(),
                 absl::ToInt64Seconds(options_.shutdown_grace));
    absl::Time deadline = absl::Now() + options_.shutdown_grace;
    // New calls now get UNAVAILABLE and probes NOT_SERVING; the calls in flight run on.
    serving_ = false;
    StopWarm();
    StopFastPath();
    StopRedisDoor();
    tracker_.StartDraining();
    server_->GetHealthCheckService()->Shutdown();
    if (probe_server_) probe_server_->GetHealthCheckService()->Shutdown();
    if (!tracker_.WaitIdle(deadline)) {
      spdlog::warn("shutdown: {} calls still in flight after the grace period; cancelling them",
                   tracker_.active());
      // Answer them CANCELLED ourselves while the connections are open: the server's own
      // cancellation below would close them first, and the clients would read UNAVAILABLE.
      tracker_.CancelAll(GraceRanOutStatus());
      tracker_.WaitIdle(absl::Now() + absl::Seconds(1));
    }
    // Everything answered: close every connection now (a graceful GOAWAY would wait for idle
    // clients to notice it) and cancel what is left.
    if (probe_listener_) probe_listener_->Stop();
    if (listener_) listener_->Stop();
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
    if (probe_server_) probe_server_->Shutdown(absl::ToChronoTime(absl::Now()));
    server_->Wait();
    if (probe_server_) probe_server_->Wait();
    RemoveSocketFile(socket_path_, socket_inode_);
    // Calls cancelled at the deadline may still have a compile running for them: give it a
    // moment, then stop the compile workers (their compiles fail, their tasks return).
    if (!pool_->Drain(absl::Now() + absl::Seconds(2))) {
      KillCompileWorkers();
      if (!pool_->Drain(absl::Now() + absl::Seconds(5))) {
        spdlog::warn(
            "shutdown: {} tasks still running; exiting without closing the stores "
            "(every write is already durable)",
            pool_->pending());
        KillCompileWorkers();  // any the tasks started meanwhile
        return clean_ = false;
      }
    }
    return clean_ = CloseCache();
  }

  int probe_port() const override { return probe_port_; }

 private:
  absl::Status OpenStores(CacheOptions* cache_options) {
    if (options_.store.empty()) {
      return absl::InvalidArgumentError("--store DIR is required: the writable artifact store");
    }
    StoreOptions writable;
    writable.max_bytes = options_.store_max_bytes;
    writable.replace_if_damaged = true;  // a damaged store must not keep kcached from starting
    writable.on_event = store_events_.Callback();
    absl::StatusOr<std::unique_ptr<Store>> local = OpenStore(options_.store, writable);
    if (!local.ok()) return local.status();
    described_.emplace_back("store", local->get());
    cache_options->local = *std::move(local);
    for (const std::string& path : options_.baked) {
      StoreOptions read_only;
      read_only.read_only = true;
      read_only.create_if_missing = false;
      read_only.on_event = store_events_.Callback();
      absl::StatusOr<std::unique_ptr<Store>> baked = OpenStore(path, read_only);
      if (!baked.ok() && !absl::IsNotFound(baked.status()) &&
          !absl::IsFailedPrecondition(baked.status())) {
        // Damaged (a flipped bit in its MANIFEST, a missing table file): kcached serves
        // without it rather than not at all; the image must be rebuilt (docs/kcached.md).
        spdlog::error(
            "--baked {} is damaged and kcached serves WITHOUT it: {}. Its kernels and objects "
            "are compiled or missed instead; rebuild the image's store (kcache warm, kcache "
            "export) or check it with `kcache doctor --store {}`",
            path, std::string(baked.status().message()), path);
        statistics_->Add(Statistic::kBakedStoresSkippedDamaged);
        continue;
      }
      if (!baked.ok()) {
        return absl::Status(baked.status().code(),
                            absl::StrCat("--baked ", path, ": ", baked.status().message()));
      }
      described_.emplace_back("baked store (read-only)", baked->get());
      cache_options->baked.push_back(*std::move(baked));
    }
    return absl::OkStatus();
  }

  // The compiler launchers' object cache over the same stores (baked first; client-made
  // objects into the writable store, and the fleet tier with --share-client-objects). The
  // stores are the cache's: the object service over it is registered on the server, which
  // shuts down before the cache closes.
  absl::Status OpenObjectCache(const CacheOptions& cache_options) {
    std::vector<Store*> baked;
    for (const auto& store : cache_options.baked) baked.push_back(store.get());
    std::unique_ptr<objects::ObjectCache> stores = objects::NewTieredObjectCache(
        cache_options.local.get(), std::move(baked), options_.objects.max_object_bytes);
    objects::ObjectCache* own_stores = stores.get();  // kept by the cache made over it
    absl::StatusOr<objects::FleetObjects> cache =
        ShareClientObjects(options_, std::move(stores), statistics_.get());
    if (!cache.ok()) return cache.status();
    object_cache_ = std::move(cache->cache);
    if (options_.object_memory_bytes > 0) {
      auto memo = std::make_unique<objects::MemoObjectCache>(
          std::move(object_cache_), options_.object_memory_bytes,
          [stats = statistics_.get()] { stats->Add(Statistic::kObjectMemoryHits); });
      object_memo_ = memo.get();
      object_cache_ = std::move(memo);
    }
    object_turns_ =
        NewObjectTurns(options_.turns, own_stores, object_memo_, cache->leases, statistics_.get());
    return absl::OkStatus();
  }

  absl::Status PrepareListenAddress() {
    if (options_.listen.empty()) {
      return absl::InvalidArgumentError(
          "--listen is required, e.g. unix:///run/kcache/kcache.sock");
    }
    socket_path_ = UnixSocketPath(options_.listen);
    if (socket_path_.empty()) {
      spdlog::warn("--listen {} is not a unix socket: anyone who can reach it may use the cache",
                   options_.listen);
      return absl::OkStatus();
    }
    bool removed_stale = false;
    if (absl::Status s = PrepareSocketPath(socket_path_, &removed_stale); !s.ok()) return s;
    if (removed_stale) spdlog::info("removed a stale socket file at {}", socket_path_);
    return absl::OkStatus();
  }

  // gRPC binds a TCP --listen itself; a unix socket is bound and accepted by a
  // UnixGrpcListener, which records who each connection comes from (the services' PeerDirectory).
  absl::Status StartMainServer() {
    grpc::ServerBuilder builder;
    if (socket_path_.empty()) {
      builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials());
    }
    builder.RegisterService(service_.get());
    builder.RegisterService(object_service_.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot listen on ", options_.listen,
                       ": gRPC could not bind it (check that the address is valid and free)"));
    }
    server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);
    if (socket_path_.empty()) return absl::OkStatus();
    // Bound owner-only, then widened to --socket-mode: never more open than asked, not even
    // for an instant.
    absl::StatusOr<std::unique_ptr<UnixGrpcListener>> listener =
        UnixGrpcListener::Start(socket_path_, server_.get(), &peers_);
    if (!listener.ok()) return listener.status();
    listener_ = *std::move(listener);
    if (absl::Status s = SetSocketMode(socket_path_, options_.socket_mode); !s.ok()) return s;
    socket_inode_ = InodeOf(socket_path_);
    return absl::OkStatus();
  }

  // The probe port: gRPC health and reflection only (the KernelCache service is not
  // registered on this server, which has no port of its own: the listener hands it the gRPC
  // connections) and HTTP GET /metrics and /healthz.
  absl::Status StartProbeServer() {
    if (options_.probe_port == 0) return absl::OkStatus();
    grpc::ServerBuilder builder;
    // A probe opens a connection per check; one left open and idle is closed after a while,
    // so that connections kept open on purpose do not pile up.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 30000);
    probe_server_ = builder.BuildAndStart();
    if (probe_server_ == nullptr) {
      return absl::InternalError("cannot start the probe port's gRPC server");
    }
    probe_server_->GetHealthCheckService()->SetServingStatus(kServiceName, false);  // Init says
    ProbeListenerOptions probe;
    probe.address = options_.probe_address;
    probe.port = options_.probe_port;
    probe.grpc_server = probe_server_.get();
    probe.metrics = [this] { return RenderMetrics(cache_->Snapshot(), Metrics()); };
    probe.serving = [this] { return serving_.load(); };
    absl::StatusOr<std::unique_ptr<ProbeListener>> listener = ProbeListener::Start(probe);
    if (!listener.ok()) return listener.status();
    probe_listener_ = *std::move(listener);
    probe_port_ = probe_listener_->port();
    return absl::OkStatus();
  }

  // The in-pod fast path beside a unix --listen socket. Optional: when it cannot start (no
  // memfd sealing in this kernel, a path that will not bind) kcached logs why and serves gRPC
  // only, which clients fall back to.
  void StartFastPath() {
    std::string path = options_.fast_socket.value_or(socket_path_.empty() ? std::string()
                                                                          : socket_path_ + ".fast");
    if (path.empty()) return;
    if (socket_path_.empty()) {
      spdlog::warn("fast path off: --fast-socket needs a unix --listen socket");
      return;
    }
    bool removed_stale = false;
    if (absl::Status s = PrepareSocketPath(path, &removed_stale); !s.ok()) {
      spdlog::warn("fast path off: {}", std::string(s.message()));
      return;
    }
    FastPathOptions fast;
    fast.socket_path = path;
    fast.socket_mode = options_.socket_mode;
    fast.arena_bytes = options_.fast_arena_bytes;
    fast.max_leased_bytes = options_.fast_max_leased_bytes;
    fast.max_connections = options_.fast_max_connections;
    if (object_memo_ != nullptr) {
      fast.objects_generation = [memo = object_memo_] { return memo->Generation(); };
    }
    absl::StatusOr<std::unique_ptr<FastPathServer>> server =
        FastPathServer::Start(cache_.get(), statistics_.get(), fast, object_cache_.get());
    if (!server.ok()) {
      spdlog::warn("fast path off (clients use gRPC): {}", std::string(server.status().message()));
      return;
    }
    fast_ = *std::move(server);
    fast_path_ = path;
    fast_inode_ = InodeOf(path);
    spdlog::info("fast path on {}: arena {} MiB, {} MiB of leases per connection, {} connections",
                 path, options_.fast_arena_bytes >> 20, options_.fast_max_leased_bytes >> 20,
                 options_.fast_max_connections);
  }

  // The Redis-protocol door (--redis-listen), over the object service's cache. An address
  // that will not bind is an error: the operator asked for the door.
  absl::Status StartRedisDoor() {
    if (options_.redis.listen.empty()) return absl::OkStatus();
    RedisDoorOptions door = options_.redis;
    door.commands.version = kVersion;
    std::string path = UnixSocketPath(door.listen);
    if (!path.empty()) {
      door.listen = absl::StrCat("unix:", path);
      bool removed_stale = false;
      if (absl::Status s = PrepareSocketPath(path, &removed_stale); !s.ok()) return s;
    }
    absl::StatusOr<std::unique_ptr<RedisDoorServer>> server =
        RedisDoorServer::Start(object_cache_.get(), statistics_.get(), door);
    if (!server.ok()) return server.status();
    redis_door_ = *std::move(server);
    redis_path_ = path;
    redis_inode_ = path.empty() ? 0 : InodeOf(path);
    service_options_.redis_door = DoorAddressForClients(door.listen, redis_door_->port(), path);
    spdlog::info(
        "Redis door on {}{}: namespaces {}, values up to {} bytes, keys up to {}, {} "
        "connections, {} MiB per connection and {} MiB in all, idle {} s",
        door.listen,
        path.empty() ? absl::StrCat(" (port ", redis_door_->port(), ")")
                     : absl::StrFormat(" (mode %04o)", static_cast<unsigned>(door.socket_mode)),
        absl::StrJoin(door.commands.namespaces, ","), door.commands.max_value_bytes,
        door.commands.max_key_bytes, door.max_connections, door.max_buffer_bytes >> 20,
        door.max_total_bytes >> 20, absl::ToInt64Seconds(door.idle_timeout));
    if (path.empty()) {
      spdlog::warn(
          "the Redis door on {} is TCP and has no passwords: every local user and process in "
          "this network namespace (and anyone who can reach a non-loopback address) can read "
          "and write its values, and Inductor's pt2: values are Python its workers run; "
          "prefer --redis-listen unix:///PATH (docs/torch-compile.md)",
          door.listen);
    }
    return absl::OkStatus();
  }

  void StopProbe() {
    if (probe_listener_) probe_listener_->Stop();
    if (probe_server_) {
      probe_server_->Shutdown(absl::ToChronoTime(absl::Now()));
      probe_server_->Wait();
    }
  }

  void StopRedisDoor() {
    if (redis_door_ == nullptr) return;
    redis_door_->Stop();
    redis_door_.reset();
    if (!redis_path_.empty()) RemoveSocketFile(redis_path_, redis_inode_);
  }

  // In the background from the start (Start waits for it up to --warm-before-ready-ms): the
  // start-up warm into the fast path's arena, then the stores' descriptions (each a walk of
  // its listing, kept off the start-up). At the normal
  // priority: a lower one could be preempted while it holds the arena's or RocksDB's locks,
  // and hold up the requests waiting for them.
  void WarmAfterStart() {
    absl::Time start = absl::Now();
    uint64_t read = 0;
    auto each = [this, &read](std::shared_ptr<const Artifact> artifact) {
      read += artifact->bytes.size();
      if (fast_ != nullptr) fast_->Preload(artifact);
      // The most recently used come first: past these, Start need not wait any longer.
      if (read >= kWarmBeforeReadyBytes && !warmed_.HasBeenNotified()) warmed_.Notify();
    };
    StartupWarmResult warmed = cache_->WarmAfterStart(options_.warm_start_bytes, each,
                                                      [this] { return !stopping_warm_.load(); });
    spdlog::info(
        "start-up warm: read {} artifacts ({} MiB of --warm-start-max-bytes {}), {} answers in "
        "memory, "
        "in {} ms",
        warmed.artifacts, warmed.bytes >> 20, options_.warm_start_bytes >> 20,
        warmed.memory_entries, absl::ToInt64Milliseconds(absl::Now() - start));
    if (!warmed_.HasBeenNotified()) warmed_.Notify();
    for (const auto& [label, store] : described_) {
      if (stopping_warm_.load()) return;
      spdlog::info("{} {}", label, DescribeStore(*store));
    }
  }

  void StopWarm() {
    stopping_warm_ = true;
    if (warm_.joinable()) warm_.join();
  }

  void StopFastPath() {
    if (fast_ == nullptr) return;
    fast_->Stop();
    fast_.reset();
    RemoveSocketFile(fast_path_, fast_inode_);
  }

  DaemonMetrics Metrics() const {
    DaemonMetrics metrics;
    metrics.version = kVersion;
    metrics.toolkit = service_options_.toolkit_name;
    metrics.start_time_unix = absl::ToUnixSeconds(service_options_.started);
    metrics.calls_in_flight = tracker_.active();
    metrics.calls_in_flight_limit = tracker_.limits().max_calls;
    metrics.queued_bytes = tracker_.queued_bytes();
    metrics.queued_bytes_limit = tracker_.limits().max_queued_bytes;
    metrics.object_memory_bytes = object_memo_ != nullptr ? object_memo_->bytes() : 0;
    metrics.uncached_options = statistics_->uncached_options().Snapshot();
    metrics.serving = serving_.load();
    metrics.accept_failures_main = listener_ != nullptr ? listener_->failed() : 0;
    metrics.accept_failures_probe = probe_listener_ != nullptr ? probe_listener_->failed() : 0;
    metrics.accept_failures_fast = fast_ != nullptr ? fast_->accept_failures() : 0;
    metrics.accept_failures_door = redis_door_ != nullptr ? redis_door_->accept_failures() : 0;
    return metrics;
  }

  void KillCompileWorkers() {
    std::vector<pid_t> pids;
    for (const std::shared_ptr<ProcessPoolCompiler>& pool : pools_) {
      std::vector<pid_t> more = pool->worker_pids();
      pids.insert(pids.end(), more.begin(), more.end());
    }
    if (pids.empty()) return;
    spdlog::warn(
        "shutdown: compiles still running after the grace period; stopping {} compile "
        "workers",
        pids.size());
    for (pid_t pid : pids) kill(pid, SIGKILL);
  }

  bool CloseCache() {
    StopRoutingProtobufLog(statistics_.get());
    StopWarm();
    StopFastPath();
    StopRedisDoor();
    service_.reset();
    pool_.reset();
    object_memo_ = nullptr;
    object_turns_.reset();
    object_cache_.reset();  // its fleet writer counts into cache_: stopped first
    cache_.reset();         // closes the stores (their writes are synced as they happen)
    pools_.clear();
    return true;
  }

  DaemonOptions options_;
  StoreEventLog store_events_;  // outlives the stores that report to it
  // The daemon's counters, shared by the cache and the services that count (the fast path,
  // the Redis door, the object service and the fleet's object tier); outlives them all.
  const std::shared_ptr<Statistics> statistics_ = std::make_shared<Statistics>();
  // Declared in dependency order; CloseCache and the destructor tear down in reverse.
  std::vector<std::shared_ptr<ProcessPoolCompiler>> pools_;  // one per toolkit; none: serve-only
  std::unique_ptr<ArtifactCache> cache_;
  std::unique_ptr<BlockingPool> pool_;
  CallTracker tracker_;
  // After the pool (a call waiting for a compile starts ticking from a pool thread), before
  // the tracker (a call it still ticks leaves the tracker when the ticker lets it go).
  ProgressTicker ticker_;
  std::unique_ptr<KernelCacheService> service_;
  std::unique_ptr<objects::ObjectCache> object_cache_;   // over the cache's stores
  objects::MemoObjectCache* object_memo_ = nullptr;      // object_cache_, --object-memory-max-bytes
  std::unique_ptr<objects::CompileTurns> object_turns_;  // over object_cache_ (and its leases)
  std::unique_ptr<ObjectCacheService> object_service_;
  std::unique_ptr<FastPathServer> fast_;         // stopped before the cache closes
  std::unique_ptr<RedisDoorServer> redis_door_;  // likewise
  std::string redis_path_;                       // its unix socket, "" for TCP
  ino_t redis_inode_ = 0;
  std::string fast_path_;
  ino_t fast_inode_ = 0;
  std::unique_ptr<grpc::Server> probe_server_;
  std::unique_ptr<ProbeListener> probe_listener_;  // stopped before probe_server_ shuts down
  std::unique_ptr<grpc::Server> server_;
  PeerDirectory peers_;                         // who each unix socket connection is
  std::unique_ptr<UnixGrpcListener> listener_;  // a unix --listen; stopped before server_
  ServiceOptions service_options_;    // as the service got them (toolkit, start time) for metrics
  std::atomic<bool> serving_{false};  // from the main socket's start to shutdown's
  std::vector<std::pair<std::string, Store*>> described_;  // the cache's stores, to describe
  std::atomic<bool> stopping_warm_{false};
  // The start-up warm ended (done, or stopped), or read its first kWarmBeforeReadyBytes.
  absl::Notification warmed_;
  std::thread warm_;  // WarmAfterStart; joined before the fast path and the cache go
  std::string socket_path_;
  ino_t socket_inode_ = 0;
  int probe_port_ = 0;
  bool shut_down_ = false;
  bool clean_ = true;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonOptions options) {
  auto daemon = std::make_unique<DaemonImpl>(std::move(options));
  if (absl::Status s = daemon->Init(); !s.ok()) return s;
  return std::unique_ptr<Daemon>(std::move(daemon));
}

}  // namespace kcache
