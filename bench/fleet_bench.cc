// bench/fleet: N kcached (each with an empty writable store and no baked store) asked at
// once, by N workers, for the bundled set for one device — sharing one Redis Cluster (six
// nodes on loopback, the shared tier with fleet-wide single-flight), against the same N
// daemons without a shared tier. Both in one run. Prints compiles run in total, the slowest
// worker's start and the compile CPU across the fleet; also the Resolve latency of a
// shared-tier hit against a writable-store hit. With --write-doc, rewrites its section of
// docs/BENCHMARKS.md.
//
//   build/bench/kcache_bench_fleet [--daemons 8] [--device 8.9] [--write-doc docs/BENCHMARKS.md]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/bench_doc.h"
#include "bench/bench_util.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/redis_cluster.h"
#include "tests/testutil/tree_paths.h"

namespace kcache::bench {
namespace {

struct FleetRun {
  uint64_t compiles = 0;
  double compile_seconds = 0;      // compile.micros across the fleet (wall of each compile)
  double compile_cpu_seconds = 0;  // compile.cpu_micros across the fleet (the workers' CPU)
  double slowest_start_s = 0;
  uint64_t shared_hits = 0;
  bool ok = true;
};

// Resolves every kernel that runs on `device` through kcached at `address`, as a starting
// worker does. Wall micros, or -1.
double StartWorker(const std::string& address, const std::vector<client::KernelSource>& sources,
                   const client::Device& device) {
  Clock::time_point start = Clock::now();
  client::ClientOptions options;
  options.address = address;
  options.local_compile_fallback = false;
  options.deadline = absl::Minutes(10);  // a compile of the heavy kernels, queued
  options.breaker_failures = 0;
  auto c = client::Client::Connect(options);
  if (!c.ok()) return -1;
  for (const client::KernelSource& s : sources) {
    if (!Runs(s, device)) continue;
    absl::StatusOr<client::FetchedKernel> k = (*c)->Resolve(s, device);
    if (!k.ok()) {
      std::fprintf(stderr, "resolve %s: %s\n", s.name.c_str(),
                   std::string(k.status().message()).c_str());
      return -1;
    }
  }
  return MicrosSince(start);
}

FleetRun RunFleet(int n, const std::vector<std::string>& flags,
                  const std::vector<client::KernelSource>& sources, const client::Device& device) {
  FleetRun run;
  std::vector<std::unique_ptr<testing::DaemonProcess>> daemons;
  for (int i = 0; i < n; ++i) {
    daemons.push_back(std::make_unique<testing::DaemonProcess>());
    daemons.back()->options().extra_flags = flags;
    daemons.back()->options().extra_flags.push_back("--compile-workers=1");
    if (absl::Status s = daemons.back()->Start(); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      run.ok = false;
      return run;
    }
  }
  std::vector<double> starts(n, 0);
  std::vector<std::thread> workers;
  for (int i = 0; i < n; ++i) {
    workers.emplace_back(
        [&, i] { starts[i] = StartWorker(daemons[i]->address(), sources, device); });
  }
  for (std::thread& worker : workers) worker.join();
  for (int i = 0; i < n; ++i) {
    if (starts[i] < 0) run.ok = false;
    run.slowest_start_s = std::max(run.slowest_start_s, starts[i] / 1e6);
    client::ClientOptions options;
    options.address = daemons[i]->address();
    auto c = client::Client::Connect(options);
    absl::StatusOr<client::DaemonStats> stats =
        c.ok() ? (*c)->Stat() : absl::StatusOr<client::DaemonStats>(c.status());
    if (!stats.ok()) {
      run.ok = false;
      continue;
    }
    run.compiles += stats->Counter("compile.runs");
    run.compile_seconds += static_cast<double>(stats->Counter("compile.micros")) / 1e6;
    run.compile_cpu_seconds += static_cast<double>(stats->Counter("compile.cpu_micros")) / 1e6;
    run.shared_hits += stats->Counter("resolve.hit.shared");
  }
  return run;
}

// Median Resolve latency (micros) of a daemon serving `source` from its writable store
// (restarted: memory empty) and of a fresh daemon serving it from the shared tier, each the
// first resolve of a fresh process, `rounds` times.
std::pair<double, double> TierLatency(const std::vector<std::string>& shared_flags,
                                      const client::KernelSource& source,
                                      const client::Device& device, int rounds) {
  std::vector<double> store, shared;
  testing::DaemonProcess filler;
  filler.options().extra_flags = shared_flags;
  if (!filler.Start().ok() || StartWorker(filler.address(), {source}, device) < 0) return {-1, -1};
  std::this_thread::sleep_for(std::chrono::seconds(1));  // its shared-tier write is done
  for (int i = 0; i < rounds; ++i) {
    filler.Stop();
    if (!filler.Start().ok()) return {-1, -1};
    store.push_back(StartWorker(filler.address(), {source}, device));
    testing::DaemonProcess fresh;
    fresh.options().extra_flags = shared_flags;
    if (!fresh.Start().ok()) return {-1, -1};
    shared.push_back(StartWorker(fresh.address(), {source}, device));
  }
  return {Median(store), Median(shared)};
}

int Main(int argc, char** argv) {
  std::string manifest_path = testing::SourcePath("kernels/manifest.yaml");
  std::string device_text = "8.9";
  std::string doc;
  int n = 8;
  CLI::App app{"a fleet of kcached sharing one Redis Cluster vs the same fleet without it"};
  app.add_option("--manifest", manifest_path, "Manifest");
  app.add_option("--device", device_text, "Device SM");
  app.add_option("--daemons", n, "kcached processes (and workers)")->check(CLI::Range(1, 64));
  app.add_option("--write-doc", doc, "Rewrite this benchmark's section of this Markdown file");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<std::vector<client::KernelSource>> loaded =
      client::LoadManifestKernels(manifest_path);
  absl::StatusOr<client::Device> device = client::Device::Parse(device_text, 13000);
  if (!loaded.ok() || !device.ok()) {
    std::fprintf(stderr, "bad --manifest or --device\n");
    return 2;
  }
  int kernels = 0;
  for (const client::KernelSource& s : *loaded) kernels += Runs(s, *device) ? 1 : 0;

  testing::RedisServers cluster;
  if (!testing::RedisAvailable() || !cluster.StartCluster()) {
    std::fprintf(stderr, "cannot start a Redis Cluster: %s\n", cluster.error().c_str());
    return 1;
  }
  testing::TempDir dir;
  std::string key = dir.Write("shared.key", "bench-fleet-shared-key-of-32-bytes-or-more");
  std::vector<std::string> shared_flags = {"--shared", cluster.Url(), "--shared-key-file", key};

  FleetRun alone = RunFleet(n, {}, *loaded, *device);
  FleetRun fleet = RunFleet(n, shared_flags, *loaded, *device);
  if (!alone.ok || !fleet.ok) return 1;
  cluster.Cli(cluster.ports()[0],
              "--cluster call 127.0.0.1:" + std::to_string(cluster.ports()[0]) + " FLUSHALL");
  auto [store_us, shared_us] = TierLatency(shared_flags, loaded->front(), *device, 5);

  std::string table = absl::StrFormat(
      "| %d kcached, %d workers at once | compiles run | slowest worker start | compile CPU "
      "time over the fleet | compile wall time summed |\n|---|---|---|---|---|\n"
      "| without a shared tier | %d | %.1f s | %.1f s | %.1f s |\n"
      "| sharing one Redis Cluster | %d (goal %d) | %.1f s | %.1f s | %.1f s |\n"
      "| **without / shared** | **%.1f×** | **%.1f×** | **%.1f×** | %.1f× |\n\n"
      "| a worker's first Resolve of `%s` from a kcached just started (connect included) "
      "| median of 5 |\n|---|---|\n"
      "| writable-store hit (the daemon restarted) | %.2f ms |\n"
      "| shared-tier hit (a new daemon: fetched, verified, written back) "
      "| %.2f ms |\n",
      n, n, static_cast<int>(alone.compiles), alone.slowest_start_s, alone.compile_cpu_seconds,
      alone.compile_seconds, static_cast<int>(fleet.compiles), kernels, fleet.slowest_start_s,
      fleet.compile_cpu_seconds, fleet.compile_seconds,
      static_cast<double>(alone.compiles) / std::max<uint64_t>(fleet.compiles, 1),
      alone.slowest_start_s / std::max(fleet.slowest_start_s, 1e-9),
      alone.compile_cpu_seconds / std::max(fleet.compile_cpu_seconds, 1e-9),
      alone.compile_seconds / std::max(fleet.compile_seconds, 1e-9), loaded->front().name,
      store_us / 1e3, shared_us / 1e3);
  std::printf("bench/fleet: device %s, %d kernels, %u cores\n%s", device_text.c_str(), kernels,
              std::thread::hardware_concurrency(), table.c_str());
  if (!doc.empty()) {
    std::string body = absl::StrCat(
        n,
        " kcached processes with empty stores, each asked at once by its own worker for the "
        "bundled set for device ",
        device_text, " (", kernels,
        " kernels), without and with a shared tier on a six-node "
        "Redis Cluster on loopback; ",
        std::thread::hardware_concurrency(),
        " cores, both in one run. Compile CPU time is what the compile workers measured for "
        "their compiles (user + system, `compile.cpu_micros`), summed over the fleet; the "
        "wall time summed (queue wait excluded) also counts the daemons' contention for the "
        "2 cores.\n\n",
        table, "\nRerun: `build/bench/kcache_bench_fleet --daemons ", n,
        " --write-doc docs/BENCHMARKS.md`\n");
    if (absl::Status s = ReplaceSection(doc, "fleet", body); !s.ok()) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace kcache::bench

int main(int argc, char** argv) { return kcache::bench::Main(argc, argv); }
