// bench/startup: a worker starting up and getting the bundled kernels for one device through
// kcached (warm: the daemon's store holds them), against the same worker compiling them in
// process with NVRTC as workers do today. Both measured in this run; prints the ratio and,
// with --write-doc, rewrites its section of docs/BENCHMARKS.md.
//
//   build/bench/kcache_bench_startup [--device 8.9] [--runs 5] [--write-doc docs/BENCHMARKS.md]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/bench_doc.h"
#include "bench/bench_util.h"
#include "tests/testutil/daemon_process.h"

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

int Main(int argc, char** argv) {
  std::string manifest_path = KCACHE_SOURCE_DIR "/kernels/manifest.yaml";
  std::string device_text = "8.9";
  std::string doc;
  int runs = 11;
  CLI::App app{"worker start-up: kernels through kcached vs compiled in process"};
  app.add_option("--manifest", manifest_path, "Manifest");
  app.add_option("--device", device_text, "Device SM");
  app.add_option("--runs", runs, "Timed start-ups through the daemon (median reported)");
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
  // Fill the daemon's store the way an image build does, then restart it so the timed runs
  // find the kernels in its store, not in its memory.
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
  if (!daemon.Start().ok()) return 1;
  int served = 0;
  int fast_served = 0;
  int unused = 0;
  std::vector<double> per_call;  // one Resolve per kernel, fast path on
  std::vector<double> grpc;      // one ResolveMany, gRPC only
  std::vector<double> batched;   // one ResolveMany, fast path on
  for (int i = 0; i < runs; ++i) {
    double t = StartThroughDaemon(daemon.address(), sources, *device, Start::kCallPerKernel,
                                  &served, &unused);
    double g = StartThroughDaemon(daemon.address(), sources, *device, Start::kBatchOverGrpc,
                                  &served, &unused);
    double b = StartThroughDaemon(daemon.address(), sources, *device, Start::kBatch, &served,
                                  &fast_served);
    if (t < 0 || g < 0 || b < 0) return 1;
    per_call.push_back(t);
    grpc.push_back(g);
    batched.push_back(b);
  }
  double compiled = StartCompiling(sources, *device);
  if (compiled < 0) return 1;

  double first_start = per_call.front();  // store hits (memory empty after the restart)
  double batch_median = Median(batched);
  std::string table = absl::StrFormat(
      "| what | wall time |\n|---|---|\n"
      "| compile %d kernels in process with NVRTC (toolkit load included) | %.2f s |\n"
      "| through kcached, first start after a daemon restart (store hits) | %.2f ms |\n"
      "| through kcached, a call per kernel, median of %d starts | %.3f ms |\n"
      "| through kcached, one batch over gRPC only, median of %d starts | %.3f ms |\n"
      "| **through kcached, one batch with the fast path (%d of %d kernels on it), median of %d "
      "starts** | **%.3f ms** (goal: under 1 ms) |\n"
      "| **compile / kcached batch (median)** | **%.0f×** (goal: at least 500×) |\n"
      "| a call per kernel / one batch | %.2f× |\n"
      "| one batch over gRPC / with the fast path | %.2f× |\n",
      served, compiled / 1e6, first_start / 1e3, runs, Median(per_call) / 1e3, runs,
      Median(grpc) / 1e3, fast_served, served, runs, batch_median / 1e3, compiled / batch_median,
      Median(per_call) / batch_median, Median(grpc) / batch_median);
  std::printf("bench/startup: device %s, %zu manifest kernels, %u cores\n%s", device_text.c_str(),
              sources.size(), std::thread::hardware_concurrency(), table.c_str());
  if (!doc.empty()) {
    std::string body = absl::StrCat(
        "A worker resolving the bundled set for device ", device_text, " (", served,
        " kernels) through kcached on a unix socket, against compiling them in process; ",
        std::thread::hardware_concurrency(), " cores, both in one run.\n\n", table,
        "\nRerun: `build/bench/kcache_bench_startup --write-doc docs/BENCHMARKS.md`\n");
    if (absl::Status s = ReplaceSection(doc, "startup", body); !s.ok()) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace kcache::bench

int main(int argc, char** argv) { return kcache::bench::Main(argc, argv); }
