#include "daemon/host/daemon_flags.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/version.h"
#include "daemon/host/listen_socket.h"
#include "daemon/host/log_format.h"
#include "daemon/host/redis_door_flags.h"
#include "daemon/host/size_flags.h"

namespace kcache {

namespace {

// What the flags give before it is made into DaemonOptions (FinishDaemonFlags).
struct FlagValues {
  std::string socket_mode = "0660";
  int64_t warm_before_ready_ms = 0;
  int64_t compile_timeout_seconds = 0;
  int64_t compile_limit_backoff_seconds = 0;
  int64_t grace_seconds = 0;
  std::string log_level = "info";
  std::string log_format = "text";
  int64_t object_wait_seconds = 180;
  int64_t shared_budget_ms = 100;
  int64_t shared_lease_seconds = 30;
  int64_t shared_wait_seconds = 60;
  std::string fast_socket;
  CLI::Option* fast_socket_option = nullptr;
  RedisDoorFlags redis;
};

// The stores, and the launchers' objects kept in them.
void AddStoreFlags(CLI::App& app, DaemonOptions& o, FlagValues& v) {
  app.add_option("--store", o.store, "Writable artifact store folder (created if missing)")
      ->required();
  AddSizeFlag(app, "--store-max-bytes", o.store_max_bytes,
              "Bound of the writable store (e.g. 8GiB, 500MiB; 0: none); past it the least "
              "recently used artifacts are evicted");
  AddSizeFlag(app, "--object-max-bytes,--max-object-bytes", o.objects.max_object_bytes,
              "Largest compiler output a launcher (kcache nvcc/c++), or value the Redis door, "
              "may store through this kcached (e.g. 256MiB); larger ones are refused");
  AddSizeFlag(app, "--object-upload-max-bytes,--max-object-upload-bytes",
              o.objects.max_upload_bytes,
              "Bytes kcached holds for launchers' uploads in flight, all together (e.g. 512MiB); "
              "each holds twice its size (its bytes, then the store's copy while written), so "
              "at least twice --object-max-bytes; an upload past it is refused, retry later");
  AddSizeFlag(app, "--object-entry-max-bytes,--max-object-entry-bytes", o.objects.max_entry_bytes,
              "Largest metadata (source path, header manifest, key fields) one launcher "
              "entry may carry (e.g. 1MiB); larger ones are refused");
  app.add_option("--max-uncached-options", o.max_uncached_options,
                 "Distinct options kcached counts launcher commands run uncached by (`kcache "
                 "stat --server`, kcache_launcher_uncached_option_total); the rest count as "
                 "\"(others)\"")
      ->capture_default_str();
  AddMibAlias(app, "--object-memory-mb", o.object_memory_bytes,
              AddSizeFlag(app, "--object-memory-max-bytes", o.object_memory_bytes,
                          "Bytes of launchers' listings and objects kept in memory once read "
                          "from a store, so the next pod's compile of the same command reads "
                          "and decompresses nothing (least recently used dropped first; 0: "
                          "none)"));
  app.add_option("--object-wait-seconds", v.object_wait_seconds,
                 "Longest a launcher's miss waits for another launcher's compile of the same "
                 "command, here or (--share-client-objects) in the fleet (0: no waiting, every "
                 "miss compiles)")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  app.add_option("--object-max-turn-calls", o.turns.max_calls,
                 "Launchers' misses kcached serves turns for at once (holding or waiting); "
                 "more compile at once")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--baked", o.baked, "Read-only store baked into the image (repeatable)")
      ->check(CLI::ExistingDirectory);
}

// Where kcached serves: its socket and its probe port.
void AddListenFlags(CLI::App& app, DaemonOptions& o, FlagValues& v) {
  app.add_option("--listen", o.listen, "Address to serve on: unix:///path/to.sock")->required();
  app.add_option("--socket-mode", v.socket_mode, "Permissions of the unix socket (octal)")
      ->capture_default_str();
  app.add_option("--probe-port", o.probe_port,
                 "TCP port for health checks and reflection only (0: none)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--probe-address", o.probe_address, "Address the probe port binds")
      ->capture_default_str();
}

// Compiles: the toolkits, the sandboxed workers and their bounds, SASS builds from PTX.
void AddCompileFlags(CLI::App& app, DaemonOptions& o, FlagValues& v) {
  app.add_option("--toolkit", o.toolkits,
                 "CUDA toolkit root (repeatable; default $CUDA_HOME or /usr/local/cuda when "
                 "present; a miss compiles with the newest one the device's driver loads)");
  app.add_flag("--no-toolkit", o.no_toolkit, "Serve only: never compile, even with a toolkit");
  app.add_flag("--allow-unsandboxed-compiles", o.allow_unsandboxed_compiles,
               "Compile sources that clients send even where the compile workers cannot be "
               "sandboxed (no Landlock or seccomp on this kernel); a client's #include can then "
               "read this machine's files. Off: only kernels of the baked stores compile there");
  app.add_option("--compile-workers", o.compile.workers,
                 "Compile worker processes (0: one per core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--compile-cpu-seconds", o.compile.cpu_seconds_per_compile,
                 "CPU seconds one compile may use (0: no limit)")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  AddMibAlias(app, "--compile-memory-mb", o.compile.memory_bytes_per_worker,
              AddSizeFlag(app, "--compile-memory-max-bytes", o.compile.memory_bytes_per_worker,
                          "Address-space limit of each compile worker (e.g. 4GiB; 0: no "
                          "limit)"));
  app.add_option("--compile-timeout-seconds", v.compile_timeout_seconds,
                 "Wall time one compile may take (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400}))
      ->capture_default_str();
  app.add_option("--compile-limit-backoff-seconds", v.compile_limit_backoff_seconds,
                 "A kernel whose compile a limit stopped is not compiled again for this long "
                 "(its callers get that error at once; 0: always retried)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400}))
      ->capture_default_str();
  app.add_option("--ptx-build-queue", o.ptx_build_queue,
                 "SASS builds from PTX that loads sent (libkcache-cuda.so's misses) waiting at "
                 "once; past it a request is refused and counted (ptx_builds.dropped)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--ptx-build-queue-per-client", o.ptx_build_queue_per_client,
                 "Of those, how many one client's loads may hold, so that one pod cannot fill "
                 "the queue (0: no such bound)")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  app.add_option("--compile-worker", o.compile.worker_binary,
                 "Path of kcache-compile-worker (default: next to kcached)");
}

// What kcached keeps in memory, and the start-up warm.
void AddMemoryFlags(CLI::App& app, DaemonOptions& o, FlagValues& v) {
  AddMibAlias(app, "--memory-cache-mb", o.memory_cache_bytes,
              AddSizeFlag(app, "--memory-cache-max-bytes", o.memory_cache_bytes,
                          "Bound of the in-memory LRU of kernels' artifacts (e.g. 256MiB)"));
  AddMibAlias(app, "--write-back-queue-mb", o.write_back_queue_bytes,
              AddSizeFlag(app, "--write-back-queue-max-bytes", o.write_back_queue_bytes,
                          "Bytes of baked-store hits waiting to be copied into the writable "
                          "store (by a thread of their own, after the request); past it a "
                          "copy is dropped and counted (tier.write_backs_dropped)"));
  AddMibAlias(app, "--warm-start-mb", o.warm_start_bytes,
              AddSizeFlag(app, "--warm-start-max-bytes", o.warm_start_bytes,
                          "Bytes of the stores' most recently used artifacts read into the "
                          "fast path's arena in the background once serving, so the first "
                          "workers find them ready (0: none)"));
  app.add_option("--warm-before-ready-ms", v.warm_before_ready_ms,
                 "How long kcached waits at most for that warm (done, or its first 16 MiB "
                 "read, the most recently used) before it opens its main socket and is ready, "
                 "so the first worker finds its kernels in memory; the warm goes on past it "
                 "(0: not at all)")
      ->check(CLI::Range(int64_t{0}, int64_t{60000}))
      ->capture_default_str();
}

// Calls in flight, shutdown and logs.
void AddCallFlags(CLI::App& app, DaemonOptions& o, FlagValues& v) {
  app.add_option("--max-calls-in-flight", o.max_calls_in_flight,
                 "Calls answered at once; more are refused RESOURCE_EXHAUSTED (retry later)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  CLI::Option* queued = AddSizeFlag(
      app, "--queued-max-bytes", o.max_queued_bytes,
      "Bytes of artifacts Resolve streams may have queued for their clients at once (1 MiB "
      "per stream sending; from 1MiB to 1TiB); past it, RESOURCE_EXHAUSTED");
  AddMibAlias(app, "--max-queued-mb", o.max_queued_bytes, queued);
  app.add_option("--shutdown-grace-seconds", v.grace_seconds,
                 "On SIGTERM, how long in-flight requests may take to finish")
      ->check(CLI::Range(int64_t{0}, int64_t{3600}))
      ->capture_default_str();
  app.add_option("--log-level", v.log_level,
                 "trace, debug (one line per request), info, warn, "
                 "error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--log-format", v.log_format,
                 "text (for people) or json (one object per line, for log collectors)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

// The fleet's Redis Cluster tier (docs/shared-tier.md).
void AddSharedTierFlags(CLI::App& app, DaemonOptions& o, FlagValues& v) {
  app.add_option("--shared", o.shared,
                 "Shared tier: redis://host:port or redis-cluster://h1:p1,h2:p2 "
                 "(docs/shared-tier.md)");
  app.add_option("--shared-key-file", o.shared_key_file,
                 "Key that signs and verifies shared-tier entries (required with --shared)");
  app.add_option("--shared-key-file-second", o.shared_key_file_second,
                 "A second key accepted when verifying (key rotation)");
  app.add_option("--shared-budget-ms", v.shared_budget_ms,
                 "Longest a shared-tier lookup may delay a miss")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  AddSizeFlag(app, "--shared-max-bytes", o.shared_max_bytes,
              "Artifacts larger than this stay out of the shared tier (e.g. 8MiB)");
  app.add_option("--shared-lease-seconds", v.shared_lease_seconds,
                 "Expiry of the lease a daemon takes on a miss before compiling it for the fleet")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--shared-wait-seconds", v.shared_wait_seconds,
                 "Longest a miss waits for another daemon's compile (0: no fleet single-flight)")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();

  app.add_flag("--share-client-objects", o.share_client_objects,
               "Also put client-made objects (kcache nvcc/c++ outputs, Redis-door values) in the "
               "--shared tier and serve them from it. Trusts every opted-in pod: any of them may "
               "serve an object another pod's client built, so one compromised pod can poison "
               "them for all. Off: they stay in this pod");
}

// The in-pod fast path (docs/client.md, "The fast path").
void AddFastPathFlags(CLI::App& app, DaemonOptions& o, FlagValues& v) {
  v.fast_socket_option = app.add_option(
      "--fast-socket", v.fast_socket,
      "In-pod fast path socket (SOCK_SEQPACKET); default <--listen path>.fast; \"\" = off");
  AddSizeFlag(app, "--fast-arena-bytes", o.fast_arena_bytes,
              "Size of the fast path's shared read-only arena (e.g. 1GiB)");
  AddSizeFlag(app, "--fast-leased-max-bytes,--fast-max-leased-bytes", o.fast_max_leased_bytes,
              "Bytes of arena one fast-path connection may hold leased; past it: gRPC");
  app.add_option("--fast-max-connections", o.fast_max_connections,
                 "Fast-path connections open at once; more are refused (they use gRPC)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
}

// The values parsed made into `o`, and the checks across flags.
absl::Status FinishDaemonFlags(FlagValues& v, DaemonOptions& o) {
  if (v.fast_socket_option->count() > 0) o.fast_socket = v.fast_socket;
  if (absl::Status s = FinishRedisDoorFlags(v.redis, o.redis); !s.ok()) return s;
  absl::StatusOr<mode_t> mode = ParseSocketMode(v.socket_mode);
  if (!mode.ok()) return mode.status();
  o.socket_mode = *mode;
  o.turns.wait = absl::Seconds(v.object_wait_seconds);
  o.warm_before_ready = absl::Milliseconds(v.warm_before_ready_ms);
  o.compile_limit_backoff = absl::Seconds(v.compile_limit_backoff_seconds);
  o.compile.wall_time_per_compile = v.compile_timeout_seconds == 0
                                        ? absl::InfiniteDuration()
                                        : absl::Seconds(v.compile_timeout_seconds);
  o.shutdown_grace = absl::Seconds(v.grace_seconds);
  if (o.max_queued_bytes < (uint64_t{1} << 20) || o.max_queued_bytes > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--queued-max-bytes ", o.max_queued_bytes,
                     " must be from 1MiB to 1TiB: each Resolve stream sending holds up to 1 MiB"));
  }
  o.shared_budget = absl::Milliseconds(v.shared_budget_ms);
  o.shared_lease = absl::Seconds(v.shared_lease_seconds);
  o.shared_wait = absl::Seconds(v.shared_wait_seconds);
  if (!o.shared.empty() && o.shared_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--shared needs --shared-key-file: entries are signed with a key only daemons hold "
        "(make one with: head -c 32 /dev/urandom | base64 > shared.key)");
  }
  if (o.objects.max_upload_bytes < UploadHolds(o.objects.max_object_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--object-upload-max-bytes ", o.objects.max_upload_bytes, " must be at least ",
        kUploadCopies, " times --object-max-bytes ", o.objects.max_object_bytes,
        ": an upload holds its bytes, then their copy in the store's write, and one of the "
        "largest object must fit"));
  }
  if (o.objects.max_entry_bytes < (64 << 10) || o.objects.max_entry_bytes > (2 << 20)) {
    return absl::InvalidArgumentError(
        "--object-entry-max-bytes must be from 64KiB to 2MiB: a launcher's entry lists its "
        "headers, and a listing page of such entries must stay under gRPC's 4 MiB message");
  }
  if (o.share_client_objects && o.shared.empty()) {
    return absl::InvalidArgumentError(
        "--share-client-objects needs --shared: the fleet tier it shares them through");
  }
  absl::StatusOr<LogFormat> format = ParseLogFormat(v.log_format);
  if (!format.ok()) return format.status();
  ConfigureLogging(*format, v.log_level);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonOptions> ParseDaemonFlags(int argc, char** argv) {
  DaemonOptions o;
  FlagValues v;
  v.warm_before_ready_ms = absl::ToInt64Milliseconds(o.warm_before_ready);
  v.compile_timeout_seconds = absl::ToInt64Seconds(o.compile.wall_time_per_compile);
  v.compile_limit_backoff_seconds = absl::ToInt64Seconds(o.compile_limit_backoff);
  v.grace_seconds = absl::ToInt64Seconds(o.shutdown_grace);

  CLI::App app{
      "kcached: the kcache daemon. Serves compiled CUDA kernels over gRPC, compiling "
      "each missing one once. See docs/kcached.md."};
  app.set_version_flag("--version", absl::StrCat("kcached ", kVersion));
  AddStoreFlags(app, o, v);
  AddListenFlags(app, o, v);
  AddCompileFlags(app, o, v);
  AddMemoryFlags(app, o, v);
  AddCallFlags(app, o, v);
  AddSharedTierFlags(app, o, v);
  AddFastPathFlags(app, o, v);
  AddRedisDoorFlags(app, o.redis, v.redis);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    app.exit(e);
    return absl::CancelledError("");
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(absl::StrCat(e.what(), "\nRun with --help for usage."));
  }
  if (absl::Status s = FinishDaemonFlags(v, o); !s.ok()) return s;
  return o;
}

}  // namespace kcache
