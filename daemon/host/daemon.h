// Daemon: kcached's lifecycle. Opens the stores, loads the toolkit(s), starts the compile
// process pool and the artifact cache, serves kcache.v1.KernelCache (plus health and
// reflection) on --listen and health + reflection only on the probe port, and shuts down
// cleanly: stop accepting, finish in-flight requests within a grace period, close the stores.
// docs/kcached.md documents the flags that fill DaemonOptions.
#ifndef KCACHE_DAEMON_HOST_DAEMON_H_
#define KCACHE_DAEMON_HOST_DAEMON_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/cache/uncached_options.h"
#include "daemon/objects/compile_turns.h"
#include "daemon/service/object_cache_service.h"
#include "daemon/service/redis_door_server.h"
#include "engine/workers/process_pool.h"

namespace kcache {

struct DaemonOptions {
  std::string store;               // --store DIR: the writable store (created if missing)
  std::vector<std::string> baked;  // --baked DIR, repeatable: read-only stores, in order
  // --store-max-bytes: bound of the writable store (LRU eviction past it); 0: unbounded.
  uint64_t store_max_bytes = uint64_t{8} << 30;
  // --toolkit DIR, repeatable. Empty: Toolkit::DefaultRoot() ($CUDA_HOME or /usr/local/cuda)
  // if a toolkit loads there, else serve-only. A toolkit named here that fails to load is an
  // error. A miss compiles with the newest one the device's driver loads that supports its
  // SM; Warm with the newest.
  std::vector<std::string> toolkits;
  bool no_toolkit = false;  // --no-toolkit: serve-only even if a toolkit is present
  // --allow-unsandboxed-compiles: compile what clients send even when the compile workers
  // cannot be sandboxed (no Landlock or seccomp here). Off: they compile only kernels the
  // baked stores hold (the image's own sources), and say why for the rest.
  bool allow_unsandboxed_compiles = false;
  std::string listen;                       // --listen: unix:///path (or host:port)
  mode_t socket_mode = 0660;                // --socket-mode
  int probe_port = 0;                       // --probe-port: TCP port for probes; 0 = none
  std::string probe_address = "127.0.0.1";  // --probe-address
  ProcessPoolOptions compile;               // --compile-workers, --compile-cpu-seconds, ...
  absl::Duration compile_limit_backoff = absl::Minutes(10);  // --compile-limit-backoff-seconds
  uint64_t memory_cache_bytes = uint64_t{256} << 20;         // --memory-cache-max-bytes
  uint64_t write_back_queue_bytes = uint64_t{64} << 20;      // --write-back-queue-max-bytes
  size_t ptx_build_queue = 32;                               // --ptx-build-queue
  size_t ptx_build_queue_per_client = 8;                     // --ptx-build-queue-per-client
  // Payload bytes the start-up warm reads once kcached serves (docs/kcached.md, "Start-up");
  // 0: none.
  uint64_t warm_start_bytes = uint64_t{128} << 20;  // --warm-start-max-bytes
  // How long Start waits at most for the start-up warm (until it is done or has read its
  // first 16 MiB, the most recently used) before it opens the main socket and kcached is
  // ready (the warm goes on in the background past it), so that the first worker after a
  // start finds its kernels in memory; zero: not at all.
  absl::Duration warm_before_ready = absl::Milliseconds(100);  // --warm-before-ready-ms
  absl::Duration shutdown_grace = absl::Seconds(30);           // --shutdown-grace-seconds
  size_t max_request_threads = 256;  // threads for blocking work (requests waiting on compiles)
  // --max-calls-in-flight: calls answered at once; more are refused RESOURCE_EXHAUSTED.
  int64_t max_calls_in_flight = 1024;
  // --queued-max-bytes: payload bytes Resolve streams may have queued for their clients at once
  // (one chunk, at most 1 MiB, per stream sending); past it RESOURCE_EXHAUSTED.
  uint64_t max_queued_bytes = uint64_t{256} << 20;
  // --shared URL: the shared tier (docs/shared-tier.md), redis://host:port or
  // redis-cluster://h1:p1,h2:p2; empty: none. Needs --shared-key-file.
  std::string shared;
  std::string shared_key_file;         // --shared-key-file: signs and verifies entries
  std::string shared_key_file_second;  // --shared-key-file-second: verifies only (rotation)
  absl::Duration shared_budget = absl::Milliseconds(100);  // --shared-budget-ms
  uint64_t shared_max_bytes = uint64_t{8} << 20;           // --shared-max-bytes
  absl::Duration shared_lease = absl::Seconds(30);         // --shared-lease-seconds
  absl::Duration shared_wait = absl::Seconds(60);          // --shared-wait-seconds
  // --fast-socket: the in-pod fast path's SOCK_SEQPACKET socket (docs/kcached.md, "The fast
  // path"); unset: <the --listen socket's path>.fast; "": off. Only with a unix --listen.
  std::optional<std::string> fast_socket;
  uint64_t fast_arena_bytes = uint64_t{1} << 30;         // --fast-arena-bytes
  uint64_t fast_max_leased_bytes = uint64_t{256} << 20;  // --fast-leased-max-bytes
  int fast_max_connections = 256;                        // --fast-max-connections
  // --object-max-bytes (the largest compiler output, object, dependency file and logs, a
  // launcher may put; docs/torch-extensions.md), --object-upload-max-bytes (the bytes of every
  // put in flight together), --object-entry-max-bytes (one entry's metadata): past each a put
  // is refused RESOURCE_EXHAUSTED, counted.
  ObjectServiceLimits objects;
  // --object-memory-max-bytes: launchers' listings and objects kept in memory once read from a
  // store (daemon/objects/memo_object_cache.h); 0: none.
  uint64_t object_memory_bytes = uint64_t{256} << 20;
  // --max-uncached-options: distinct (reason, option) pairs kcached counts launcher commands
  // run uncached by (daemon/cache/uncached_options.h); past it, option "(others)".
  size_t max_uncached_options = UncachedOptionCounts::kDefaultLimit;
  // --object-wait-seconds, --object-max-turn-calls: one compile per launcher miss
  // (daemon/objects/compile_turns.h; across the fleet with --share-client-objects, whose
  // leases last --shared-lease-seconds).
  objects::CompileTurnOptions turns;
  // --share-client-objects: client-made objects (the launchers', the Redis door's) also go to
  // and come from the shared tier (daemon/objects/fleet_object_cache.h). Needs --shared.
  bool share_client_objects = false;
  // --redis-listen and the other --redis-* flags: the Redis-protocol door for torch.compile
  // and Triton (docs/torch-compile.md); off while `redis.listen` is empty.
  RedisDoorOptions redis;
};

class Daemon {
 public:
  // Opens everything and starts listening. Errors say what to fix (a store that will not
  // open, a --toolkit that will not load, a live daemon on the socket, a port in use).
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonOptions options);

  // Shuts down (as Shutdown) if that has not happened.
  virtual ~Daemon() = default;

  // Stops accepting, lets in-flight requests finish for up to the grace period (then cancels
  // them), waits a little longer for their background work, then closes the cache and the
  // stores. Returns false when background work was still running at the end (the stores are
  // then left open: every write is already durable). Idempotent.
  virtual bool Shutdown() = 0;

  // The probe port bound, or 0 when there is none.
  virtual int probe_port() const = 0;
};

// kcached's main loop: starts the daemon, waits for SIGTERM or SIGINT, shuts down. Returns
// the process exit code: 0 after a clean shutdown, 1 when start-up failed. A second SIGTERM
// or SIGINT during shutdown exits at once with 1. SIGHUP, SIGUSR1 and SIGUSR2 are logged
// and ignored.
int RunDaemon(DaemonOptions options);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_DAEMON_H_
