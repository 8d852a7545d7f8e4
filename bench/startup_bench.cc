// bench/startup: a worker starting up and getting the bundled kernels for one device through
// kcached (warm: the daemon's store holds them), against the same worker compiling them in
// process with NVRTC as workers do today; the first start after the daemon started against
// the next ones; the example worker's whole start; and kcached from exec to ready with a large
// store. All measured in this run; prints the ratios and, with --write-doc, rewrites its
// section of docs/BENCHMARKS.md.
//
//   build/bench/kcache_bench_startup [--device 8.9] [--runs 11] [--large-artifacts 20000]
//                                    [--large-bytes 2GiB] [--write-doc docs/BENCHMARKS.md]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/bench_doc.h"
#include "bench/bench_util.h"
#include "bench/daemon_start.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache::bench {
namespace {

enum class Start { kCallPerKernel, kBatchOverGrpc, kBatch };

// Resolves every kernel that runs on `device` through a new client, as a starting worker
// does (the connection is made inside the timed region): one call per kernel, or one batch
// (ResolveMany) over gRPC only or with the fast path (the default). Returns the wall micros,
// or -1; `served` and `on_fast_path` count the kernels.
double StartThroughDaemon(const std::string& address,
                          const std::vector<client::KernelSource>& sources,
                          const client::Device& device, Start how, int* served, int* on_fast_path) {
  Clock::time_point start = Clock::now();
  client::ClientOptions options;
  options.address = address;
  options.local_compile_fallback = false;
  options.fast_path = how != Start::kBatchOverGrpc;
  auto c = client::Client::Connect(options);
  if (!c.ok()) return -1;
  std::vector<client::KernelRef> wanted;
  for (const client::KernelSource& s : sources) {
    if (Runs(s, device)) wanted.push_back(s);
  }
  std::vector<absl::StatusOr<client::FetchedKernel>> results;
  if (how == Start::kCallPerKernel) {
    for (const client::KernelRef& k : wanted) results.push_back((*c)->Resolve(k.source, device));
  } else {
    results = (*c)->ResolveMany(wanted, device);
  }
  double micros = MicrosSince(start);
  *served = *on_fast_path = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      std::fprintf(stderr, "resolve %s: %s\n", wanted[i].source.name.c_str(),
                   std::string(results[i].status().message()).c_str());
      return -1;
    }
    ++*served;
    if (results[i]->view_owner != nullptr) ++*on_fast_path;
  }
  return micros;
}

// Compiles every kernel that runs on `device` in this process, toolkit load included.
double StartCompiling(const std::vector<client::KernelSource>& sources,
                      const client::Device& device) {
  Clock::time_point start = Clock::now();
  client::LocalCompiler compiler;
  for (const client::KernelSource& s : sources) {
    if (!Runs(s, device)) continue;
    absl::StatusOr<client::FetchedKernel> k = compiler.Compile(s, device);
    if (!k.ok()) {
      std::fprintf(stderr, "compile %s: %s\n", s.name.c_str(),
                   std::string(k.status().message()).c_str());
      return -1;
    }
  }
  return MicrosSince(start);
}

// The example worker's whole start on `device` against `address`, as it reports it: from
// making its client to the last kernel, the sum of its client, manifest and kernels phases
// (process start-up excluded), without the phase that finds the GPUs (cuInit on a GPU machine,
// a failed libcuda load here: the driver's, timed apart) or what it does with the kernels
// after (loading and checking them on each GPU: the driver's), and its phases. A new process each
// time, as a worker starts: $KCACHE_EXAMPLE_WORKER, else the build tree's (as kcached is $KCACHED,
// else the build tree's). Micros; total -1 when it failed.
struct WorkerTimes {
  double total = -1, manifest = 0, gpus = 0, kernels = 0;
};
WorkerTimes WorkerStart(const std::string& manifest, const std::string& device,
                        const std::string& address) {
  const char* env = std::getenv("KCACHE_EXAMPLE_WORKER");
  std::string binary = testing::BinaryPath("examples/worker/kcache-example-worker");
  if (env != nullptr && *env != '\0') binary = env;
  std::string command = absl::StrCat(binary, " --json --manifest ", manifest, " --device ", device,
                                     " --driver 13000 --server ", address);
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return {};
  std::string json;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), out)) json.append(buffer, n);
  if (pclose(out) != 0) return {};
  auto field = [&json](const std::string& name) {
    size_t at = json.rfind(absl::StrCat("\"", name, "\": "));
    return at == std::string::npos ? -1.0 : std::atof(json.c_str() + at + name.size() + 4);
  };
  double client = field("client"), manifest_phase = field("manifest"), gpus = field("gpus"),
         kernels = field("kernels");
  if (client < 0 || manifest_phase < 0 || gpus < 0 || kernels < 0) return {};
  return WorkerTimes{client + manifest_phase + kernels, manifest_phase, gpus, kernels};
}

// Copies every kernel record and artifact of the store at `from` into the one at `to`.
absl::Status CopyStore(const std::string& from, const std::string& to) {
  StoreOptions read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> source = OpenStore(from, read_only);
  absl::StatusOr<std::unique_ptr<Store>> target = OpenStore(to);
  if (!source.ok() || !target.ok()) return absl::InternalError("cannot open the stores to copy");
  absl::StatusOr<std::vector<KernelRecord>> records = (*source)->ListKernels();
  absl::StatusOr<std::vector<ArtifactMeta>> metas = (*source)->ListAllArtifacts();
  if (!records.ok() || !metas.ok()) return absl::InternalError("cannot list the store to copy");
  for (const KernelRecord& r : *records) {
    if (absl::Status s = (*target)->PutKernel(r); !s.ok()) return s;
  }
  for (const ArtifactMeta& m : *metas) {
    absl::StatusOr<Artifact> a = (*source)->Get(m.key);
    if (!a.ok()) return a.status();
    if (absl::Status s = (*target)->Put(*a); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Writes every artifact of the store at `small` into the store at `large` again, used now:
// they become the large store's most recently used, as the kernels a fleet's workers ask for
// are in the store of an image build that warms them last (`kcache export-manifest`, then
// `kcache warm` into the store), or in a node's store after its workers used them.
absl::Status UseLast(const std::string& small, const std::string& large) {
  StoreOptions read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> source = OpenStore(small, read_only);
  absl::StatusOr<std::unique_ptr<Store>> target = OpenStore(large);
  if (!source.ok() || !target.ok()) return absl::InternalError("cannot open the stores");
  absl::StatusOr<std::vector<ArtifactMeta>> metas = (*source)->ListAllArtifacts();
  if (!metas.ok()) return metas.status();
  for (const ArtifactMeta& m : *metas) {
    absl::StatusOr<Artifact> a = (*source)->Get(m.key);
    if (!a.ok()) return a.status();
    a->meta.last_used_unix_ms = NowUnixMillis();
    if (absl::Status s = (*target)->Put(*a); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// kcached started on `options` `times` times (a fresh writable store each time): exec to
// ready, and the first and the next one-batch start after it.
struct DaemonStarts {
  std::vector<double> ready, first, next;
};
absl::StatusOr<DaemonStarts> TimeDaemonStarts(const testing::DaemonOptions& options, int times,
                                              const std::vector<client::KernelSource>& sources,
                                              const client::Device& device) {
  DaemonStarts out;
  for (int i = 0; i < times; ++i) {
    testing::DaemonProcess daemon(options);
    absl::StatusOr<double> ready = StartTimed(daemon);
    if (!ready.ok()) return ready.status();
    int served = 0, unused = 0;
    double first =
        StartThroughDaemon(daemon.address(), sources, device, Start::kBatch, &served, &unused);
    double next =
        StartThroughDaemon(daemon.address(), sources, device, Start::kBatch, &served, &unused);
    if (first < 0 || next < 0) return absl::InternalError("a start through kcached failed");
    out.ready.push_back(*ready);
    out.first.push_back(first);
    out.next.push_back(next);
  }
  return out;
}

// The rows of kcached started with a large baked store: the store at `small` (the bundled
// kernels) plus `artifacts` synthetic artifacts written after them, against kcached with an
// empty store; then the same store once the bundled kernels were used last (UseLast).
absl::StatusOr<std::string> LargeStoreRows(const std::string& small, uint64_t artifacts,
                                           uint64_t bytes, int times,
                                           const std::vector<client::KernelSource>& sources,
                                           const client::Device& device) {
  testing::TempDir dir;
  std::string large = dir / "large";
  Clock::time_point start = Clock::now();
  if (absl::Status s = CopyStore(small, large); !s.ok()) return s;
  if (absl::Status s = AddSyntheticArtifacts(large, artifacts, bytes); !s.ok()) return s;
  double written = MicrosSince(start);
  std::fprintf(stderr, "wrote the large store (%llu artifacts) in %.1f s\n",
               static_cast<unsigned long long>(artifacts), written / 1e6);
  std::vector<double> empty_ready;
  for (int i = 0; i < times; ++i) {
    testing::DaemonProcess empty;
    absl::StatusOr<double> ready = StartTimed(empty);
    if (!ready.ok()) return ready.status();
    empty_ready.push_back(*ready);
  }
  testing::DaemonOptions options;
  options.baked = {large};
  absl::StatusOr<DaemonStarts> starts = TimeDaemonStarts(options, times, sources, device);
  if (!starts.ok()) return starts.status();
  if (absl::Status s = UseLast(small, large); !s.ok()) return s;
  absl::StatusOr<DaemonStarts> used_last = TimeDaemonStarts(options, times, sources, device);
  if (!used_last.ok()) return used_last.status();
  double ready = Median(starts->ready);
  return absl::StrFormat(
      "| kcached from exec to ready (READY=1), empty store, median of %d | %.1f ms |\n"
      "| **kcached from exec to ready, baked store of %llu artifacts (%.2f GiB), median of %d** "
      "| **%.1f ms** (goal: at most 200 ms; %.2f× the empty store) |\n"
      "| with that store: first start after the daemon started, one batch | %.3f ms |\n"
      "| with that store: the next start, one batch | %.3f ms (first / next: %.2f×) |\n"
      "| the same store, its %zu kernels' artifacts its most recently used (the start-up warm "
      "reads them first): first start / next start | %.3f / %.3f ms (**%.2f×**) |\n",
      times, Median(empty_ready) / 1e3, static_cast<unsigned long long>(artifacts),
      static_cast<double>(bytes) / (1ull << 30), times, ready / 1e3, ready / Median(empty_ready),
      Median(starts->first) / 1e3, Median(starts->next) / 1e3,
      Median(starts->first) / Median(starts->next), sources.size(), Median(used_last->first) / 1e3,
      Median(used_last->next) / 1e3, Median(used_last->first) / Median(used_last->next));
}

int Main(int argc, char** argv) {
  std::string manifest_path = testing::SourcePath("kernels/manifest.yaml");
  std::string device_text = "8.9";
  std::string doc;
  int runs = 11;
  int restarts = 5;
  uint64_t large_artifacts = 20000;
  uint64_t large_bytes = uint64_t{2} << 30;
  CLI::App app{"worker start-up: kernels through kcached vs compiled in process"};
  app.add_option("--manifest", manifest_path, "Manifest");
  app.add_option("--device", device_text, "Device SM");
  app.add_option("--runs", runs, "Timed start-ups through the daemon (median reported)");
  app.add_option("--restarts", restarts,
                 "Daemon starts timed (exec to ready, first and next worker start; median)");
  app.add_option("--large-artifacts", large_artifacts,
                 "Synthetic artifacts in the large store (0: no large-store rows)");
  app.add_option("--large-bytes", large_bytes, "Their payload bytes in all")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--write-doc", doc, "Rewrite this benchmark's section of this Markdown file");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<std::vector<client::KernelSource>> loaded =
      client::LoadManifestKernels(manifest_path);
  absl::StatusOr<client::Device> device = client::Device::Parse(device_text, 13000);
  if (!loaded.ok() || !device.ok()) {
    std::fprintf(stderr, "bad --manifest or --device\n");
    return 2;
  }
  const std::vector<client::KernelSource>& sources = *loaded;

  testing::DaemonProcess daemon;
  if (absl::Status s = daemon.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  // Fill the daemon's store the way an image build does, then restart it so the first start
  // finds the kernels in its store, not in its memory.
  {
    client::ClientOptions options;
    options.address = daemon.address();
    auto c = client::Client::Connect(options);
    absl::StatusOr<client::WarmTotals> warmed =
        c.ok() ? (*c)->Warm(sources, {device_text}, 0, absl::ZeroDuration(), nullptr)
               : absl::StatusOr<client::WarmTotals>(c.status());
    if (!warmed.ok() || warmed->failed != 0) {
      std::fprintf(stderr, "warming the daemon failed\n");
      return 1;
    }
  }
  daemon.Stop();
  // The first one-batch start after each daemon start (store hits) and the next (memory hits).
  int served = 0;
  int fast_served = 0;
  int unused = 0;
  std::vector<double> firsts, nexts;
  for (int i = 0; i < restarts; ++i) {
    daemon.Stop();
    if (!daemon.Start().ok()) return 1;
    double f =
        StartThroughDaemon(daemon.address(), sources, *device, Start::kBatch, &served, &unused);
    double n =
        StartThroughDaemon(daemon.address(), sources, *device, Start::kBatch, &served, &unused);
    if (f < 0 || n < 0) return 1;
    firsts.push_back(f);
    nexts.push_back(n);
  }
  std::vector<double> per_call;                         // one Resolve per kernel, fast path on
  std::vector<double> grpc;                             // one ResolveMany, gRPC only
  std::vector<double> batched;                          // one ResolveMany, fast path on
  std::vector<double> worker;                           // the example worker's whole start
  std::vector<double> worker_manifest, worker_kernels;  // two of its phases
  std::vector<double> baked, baked_manifest;            // the same with a baked manifest
  std::vector<double> worker_gpus;                      // its phase left out: finding the GPUs
  testing::TempDir bake_dir;
  std::string baked_path = bake_dir / "manifest.kcb";
  if (absl::Status s = client::BakeManifest(manifest_path, baked_path); !s.ok()) {
    std::fprintf(stderr, "bake-manifest: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  for (int i = 0; i < runs; ++i) {
    double t = StartThroughDaemon(daemon.address(), sources, *device, Start::kCallPerKernel,
                                  &served, &unused);
    double g = StartThroughDaemon(daemon.address(), sources, *device, Start::kBatchOverGrpc,
                                  &served, &unused);
    double b = StartThroughDaemon(daemon.address(), sources, *device, Start::kBatch, &served,
                                  &fast_served);
    WorkerTimes w = WorkerStart(manifest_path, device_text, daemon.address());
    WorkerTimes wb = WorkerStart(baked_path, device_text, daemon.address());
    if (t < 0 || g < 0 || b < 0 || w.total < 0 || wb.total < 0) return 1;
    baked.push_back(wb.total);
    baked_manifest.push_back(wb.manifest);
    worker_gpus.push_back(wb.gpus);
    per_call.push_back(t);
    grpc.push_back(g);
    batched.push_back(b);
    worker.push_back(w.total);
    worker_manifest.push_back(w.manifest);
    worker_kernels.push_back(w.kernels);
  }
  daemon.Stop();
  double compiled = StartCompiling(sources, *device);
  if (compiled < 0) return 1;

  double batch_median = Median(batched);
  std::string table = absl::StrFormat(
      "| what | wall time |\n|---|---|\n"
      "| compile %d kernels in process with NVRTC (toolkit load included) | %.2f s |\n"
      "| **through kcached, first start after the daemon started, one batch, "
      "median of %d daemon starts** | **%.3f ms** |\n"
      "| the next start after it (memory hits), one batch, median of %d | %.3f ms |\n"
      "| **first start / next start** | **%.2f×** (goal: at most 2×) |\n"
      "| through kcached, a call per kernel, median of %d starts | %.3f ms |\n"
      "| through kcached, one batch over gRPC only, median of %d starts | %.3f ms |\n"
      "| **through kcached, one batch with the fast path (%d of %d kernels on it), median of %d "
      "starts** | **%.3f ms** (goal: under 1 ms) |\n"
      "| the example worker's whole start on memory hits (client, YAML manifest and its "
      "sources, batch), median of %d | %.3f ms |\n"
      "| of which reading the manifest and its sources / getting the kernels (medians) | %.3f / "
      "%.3f ms |\n"
      "| **the example worker's whole start on memory hits, baked manifest (`kcache "
      "bake-manifest`), median of %d** | **%.3f ms** (goal: at most 1 ms) |\n"
      "| of which reading the baked manifest (median) | %.3f ms |\n"
      "| not in those: the worker finding its GPUs (the driver's: no libcuda here, cuInit on a "
      "GPU), median | %.3f ms |\n"
      "| **compile / kcached batch (median)** | **%.0f×** (goal: at least 500×) |\n"
      "| a call per kernel / one batch | %.2f× |\n"
      "| one batch over gRPC / with the fast path | %.2f× |\n",
      served, compiled / 1e6, restarts, Median(firsts) / 1e3, restarts, Median(nexts) / 1e3,
      Median(firsts) / Median(nexts), runs, Median(per_call) / 1e3, runs, Median(grpc) / 1e3,
      fast_served, served, runs, batch_median / 1e3, runs, Median(worker) / 1e3,
      Median(worker_manifest) / 1e3, Median(worker_kernels) / 1e3, runs, Median(baked) / 1e3,
      Median(baked_manifest) / 1e3, Median(worker_gpus) / 1e3, compiled / batch_median,
      Median(per_call) / batch_median, Median(grpc) / batch_median);

  if (large_artifacts > 0) {
    absl::StatusOr<std::string> rows = LargeStoreRows(daemon.store_path(), large_artifacts,
                                                      large_bytes, restarts, sources, *device);
    if (!rows.ok()) {
      std::fprintf(stderr, "large store: %s\n", std::string(rows.status().message()).c_str());
      return 1;
    }
    absl::StrAppend(&table, *rows);
  }
  std::printf("bench/startup: device %s, %zu manifest kernels, %u cores\n%s", device_text.c_str(),
              sources.size(), std::thread::hardware_concurrency(), table.c_str());
  if (!doc.empty()) {
    std::string body = absl::StrCat(
        "A worker resolving the bundled set for device ", device_text, " (", served,
        " kernels) through kcached on a unix socket, against compiling them in process; ",
        std::thread::hardware_concurrency(), " cores, all in one run.\n\n", table,
        "\nRerun: `build/bench/kcache_bench_startup --write-doc docs/BENCHMARKS.md` (",
        "`--large-artifacts 2000 --large-bytes 200MiB` for a quicker run)\n");
    if (absl::Status s = ReplaceSection(doc, "startup", body); !s.ok()) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace kcache::bench

int main(int argc, char** argv) { return kcache::bench::Main(argc, argv); }
