#include "examples/worker/worker.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kcache/device.h"
#include "kcache/kcache.h"
#include "kcache/node.h"

namespace kcache::example {
namespace {

using client::Device;
using client::FetchedKernel;
using client::GpuInfo;
using client::KernelSource;

using Clock = std::chrono::steady_clock;
using Results = std::vector<absl::StatusOr<FetchedKernel>>;

int64_t MicrosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

std::string ArchText(int arch) {
  return arch == 0 ? std::string() : absl::StrCat(arch / 10, ".", arch % 10);
}

std::string Ms(int64_t micros) { return absl::StrFormat("%.1f ms", micros / 1e3); }

// The GPUs to resolve for, and whether each is there to load on.
struct Node {
  std::vector<GpuInfo> gpus;
  std::vector<bool> loads;         // loads[g]: GPU g is a real GPU of this machine
  std::vector<std::string> notes;  // how GPU g was chosen
};

int NoGpu(const absl::Status& why) {
  std::fprintf(stderr,
               "kcache-example-worker: no GPU to start on: %s\n"
               "(pass --device 8.9, repeated for a node, to resolve the kernels anyway)\n",
               std::string(why.message()).c_str());
  return 2;
}

// The node: every GPU detected, or one pretend GPU per --device (GPU i is loaded on the
// machine's GPU i when that has the same SM).
std::optional<Node> ChooseGpus(const WorkerFlags& flags, int* exit_code) {
  absl::StatusOr<std::vector<GpuInfo>> detected = client::DetectDevices();
  Node node;
  if (flags.devices.empty()) {
    if (!detected.ok()) {
      *exit_code = NoGpu(detected.status());
      return std::nullopt;
    }
    node.gpus = *detected;
    node.loads.assign(node.gpus.size(), true);
    for (const GpuInfo& gpu : node.gpus) {
      node.notes.push_back(absl::StrCat("GPU ", gpu.ordinal, ": ", gpu.name));
    }
    return node;
  }
  std::vector<Device> devices;
  for (const std::string& text : flags.devices) {
    uint32_t driver = flags.driver;
    if (driver == 0 && detected.ok()) driver = detected->front().device.driver_version;
    absl::StatusOr<Device> device = Device::Parse(text, driver);
    if (!device.ok()) {
      std::fprintf(stderr, "kcache-example-worker: --device %s: %s\n", text.c_str(),
                   std::string(device.status().message()).c_str());
      *exit_code = 2;
      return std::nullopt;
    }
    devices.push_back(*device);
  }
  node.gpus = client::PretendGpus(devices);
  for (GpuInfo& gpu : node.gpus) {
    size_t g = static_cast<size_t>(gpu.ordinal);
    const GpuInfo* real = detected.ok() && g < detected->size() ? &(*detected)[g] : nullptr;
    bool same_sm = real != nullptr && real->device.arch() == gpu.device.arch();
    node.loads.push_back(same_sm);
    if (same_sm) gpu.name = real->name;
    node.notes.push_back(same_sm ? absl::StrCat("--device; loaded on GPU ", g, ": ", gpu.name)
                         : real != nullptr
                             ? absl::StrCat("--device; GPU ", g, " is sm_", real->device.arch(),
                                            ": kernels are not loaded")
                             : "--device; no such GPU here: kernels are not loaded");
  }
  return node;
}

struct KernelReport {
  std::string name;
  std::string outcome;  // "served", "skipped", "failed"
  std::string target, kind, rule, served_from, reason;
  uint64_t bytes = 0;
  int64_t resolve_micros = 0;
  int64_t load_micros = -1;  // -1: not loaded
};

// Why the worker does not want `source` on `device`, or "" when it does.
std::string SkipReason(const KernelSource& source, const Device& device) {
  bool in_range = (source.min_arch == 0 || device.arch() >= source.min_arch) &&
                  (source.max_arch == 0 || device.arch() <= source.max_arch);
  if (in_range) return "";
  return absl::StrCat("its arch range ", ArchText(source.min_arch), "..", ArchText(source.max_arch),
                      " excludes ", device.ToString());
}

// Reports one kernel for one GPU, loading it there when the GPU is real (LoadedModule::Load
// checks the artifact against the GPU and looks up every entry point).
KernelReport Report(const KernelSource& source, const absl::StatusOr<FetchedKernel>& k,
                    const GpuInfo& gpu, bool load) {
  KernelReport r;
  r.name = source.name;
  if (std::string skip = SkipReason(source, gpu.device); !skip.empty()) {
    r.outcome = "skipped";
    r.reason = skip;
    return r;
  }
  if (!k.ok()) {
    r.outcome = "failed";
    r.reason = std::string(k.status().message());
    return r;
  }
  r.outcome = "served";
  r.target = k->target;
  r.kind = std::string(client::ArtifactKindName(k->kind));
  r.rule = std::string(client::ServeRuleName(k->rule));
  r.served_from = std::string(client::ServedFromName(k->served_from));
  r.reason = k->reason;
  r.bytes = k->data().size();
  r.resolve_micros = k->micros;
  if (load) {
    absl::StatusOr<std::unique_ptr<client::LoadedModule>> module =
        client::LoadedModule::Load(*k, gpu.ordinal);
    if (!module.ok()) {
      r.outcome = "failed";
      r.reason = absl::StrCat("load: ", module.status().message());
      return r;
    }
    r.load_micros = (*module)->load_micros();
  }
  return r;
}

// Every kernel for every distinct device of the node: from kcached in one call (`c`), or
// compiled here (`local`), kernels outside a device's arch range left out.
client::NodeKernels GetKernels(const std::vector<KernelSource>& kernels, const Node& node,
                               client::Client* c, client::LocalCompiler* local) {
  if (c != nullptr) {
    std::vector<client::KernelRef> refs(kernels.begin(), kernels.end());
    return client::ResolveForGpus(*c, refs, node.gpus);
  }
  client::NodeKernels out;
  out.gpus = node.gpus;
  out.devices = client::DistinctDevices(node.gpus, &out.device_of_gpu);
  for (const Device& device : out.devices) {
    Results& results = out.kernels.emplace_back();
    for (const KernelSource& source : kernels) {
      Clock::time_point start = Clock::now();
      absl::StatusOr<FetchedKernel> k =
          SkipReason(source, device).empty()
              ? local->Compile(source, device)
              : absl::StatusOr<FetchedKernel>(absl::NotFoundError("outside its arch range"));
      if (k.ok()) k->micros = MicrosSince(start);
      results.push_back(std::move(k));
    }
  }
  return out;
}

struct GpuReport {
  GpuInfo gpu;
  bool loaded = false;
  std::string note;
  std::vector<KernelReport> kernels;
  int failed = 0;
  int skipped = 0;
};

std::vector<GpuReport> ReportNode(const std::vector<KernelSource>& kernels, const Node& node,
                                  const client::NodeKernels& got) {
  std::vector<GpuReport> out;
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    GpuReport& r = out.emplace_back();
    r.gpu = node.gpus[g];
    r.loaded = node.loads[g];
    r.note = node.notes[g];
    for (size_t k = 0; k < kernels.size(); ++k) {
      r.kernels.push_back(Report(kernels[k], got.ForGpu(g)[k], r.gpu, r.loaded));
      r.failed += r.kernels.back().outcome == "failed";
      r.skipped += r.kernels.back().outcome == "skipped";
    }
  }
  return out;
}

void PrintText(const std::string& mode, const std::vector<GpuReport>& gpus, size_t devices,
               int64_t total_micros) {
  if (gpus.size() > 1) {
    std::printf("node of %zu GPUs, %zu distinct SMs (one resolve each)\n", gpus.size(), devices);
  }
  std::printf("kernels from %s\n", mode.c_str());
  std::map<std::string, int> by_source;
  int failed = 0, skipped = 0;
  for (const GpuReport& g : gpus) {
    std::printf("%sdevice %s (driver %u; %s)\n",
                gpus.size() > 1 ? absl::StrCat("GPU ", g.gpu.ordinal, ": ").c_str() : "",
                g.gpu.device.ToString().c_str(), g.gpu.device.driver_version, g.note.c_str());
    for (const KernelReport& r : g.kernels) {
      if (r.outcome == "served") {
        ++by_source[r.served_from];
        std::printf("  %-28s %-10s %-6s %-15s %-19s %9s%s\n", r.name.c_str(), r.target.c_str(),
                    r.kind.c_str(), r.rule.c_str(), r.served_from.c_str(),
                    Ms(r.resolve_micros).c_str(),
                    r.load_micros >= 0 ? absl::StrCat("  load ", Ms(r.load_micros)).c_str() : "");
      } else {
        std::printf("  %-28s %s: %s\n", r.name.c_str(), r.outcome.c_str(), r.reason.c_str());
      }
    }
    failed += g.failed;
    skipped += g.skipped;
  }
  std::string sources;
  for (const auto& [from, n] : by_source)
    absl::StrAppend(&sources, sources.empty() ? "" : ", ", n, " ", from);
  size_t per_gpu = gpus.empty() ? 0 : gpus.front().kernels.size();
  std::printf("total %zu kernels%s in %s (%s; %d skipped, %d failed)\n", per_gpu,
              gpus.size() > 1 ? absl::StrCat(" x ", gpus.size(), " GPUs").c_str() : "",
              Ms(total_micros).c_str(), sources.empty() ? "none served" : sources.c_str(), skipped,
              failed);
}

nlohmann::json KernelsJson(const std::vector<KernelReport>& reports) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelReport& r : reports) {
    kernels.push_back({{"name", r.name},
                       {"outcome", r.outcome},
                       {"target", r.target},
                       {"kind", r.kind},
                       {"rule", r.rule},
                       {"served_from", r.served_from},
                       {"reason", r.reason},
                       {"bytes", r.bytes},
                       {"resolve_micros", r.resolve_micros},
                       {"load_micros", r.load_micros}});
  }
  return kernels;
}

// Where the whole start went (micros), in order: making the client, reading the manifest and
// the kernels' sources, finding the GPUs, getting (and loading) the kernels.
struct Phases {
  int64_t manifest = 0, gpus = 0, client = 0, kernels = 0;
};

// GPU 0's report at the top level (as a one-GPU worker reports), every GPU's under "gpus".
void PrintJson(const std::string& mode, const std::vector<GpuReport>& gpus, size_t devices,
               int64_t total_micros, const Phases& phases) {
  nlohmann::json per_gpu = nlohmann::json::array();
  int failed = 0;
  for (const GpuReport& g : gpus) {
    failed += g.failed;
    per_gpu.push_back({{"ordinal", g.gpu.ordinal},
                       {"name", g.gpu.name},
                       {"device", g.gpu.device.ToString()},
                       {"driver", g.gpu.device.driver_version},
                       {"loaded", g.loaded},
                       {"note", g.note},
                       {"kernels", KernelsJson(g.kernels)},
                       {"failed", g.failed}});
  }
  const GpuReport& first = gpus.front();
  nlohmann::json out = {{"device", first.gpu.device.ToString()},
                        {"driver", first.gpu.device.driver_version},
                        {"gpu", first.loaded ? nlohmann::json(first.gpu.name) : nlohmann::json()},
                        {"mode", mode},
                        {"kernels", KernelsJson(first.kernels)},
                        {"gpus", per_gpu},
                        {"distinct_devices", devices},
                        {"failed", failed},
                        {"total_micros", total_micros},
                        {"phase_micros",
                         {{"manifest", phases.manifest},
                          {"gpus", phases.gpus},
                          {"client", phases.client},
                          {"kernels", phases.kernels}}}};
  std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace

int RunWorker(const WorkerFlags& flags) {
  Clock::time_point start = Clock::now();
  Phases phases;
  // The client first: it connects to kcached's fast path now, and the daemon's answer to that
  // arrives while the manifest is read and the GPUs are found.
  std::unique_ptr<client::Client> c;
  std::unique_ptr<client::LocalCompiler> local;
  std::string mode;
  if (flags.no_cache) {
    local = std::make_unique<client::LocalCompiler>(flags.toolkit);
    mode = "NVRTC in this process (--no-cache)";
  } else {
    client::ClientOptions options;
    if (!flags.server.empty()) options.address = flags.server;
    options.deadline = absl::Milliseconds(flags.deadline_ms);
    options.toolkit_root = flags.toolkit;
    options.client_name = "kcache-example-worker";
    absl::StatusOr<std::unique_ptr<client::Client>> connected = client::Client::Connect(options);
    if (!connected.ok()) {
      std::fprintf(stderr, "kcache-example-worker: %s\n",
                   std::string(connected.status().message()).c_str());
      return 2;
    }
    c = *std::move(connected);
    mode = absl::StrCat("kcached at ", options.address);
  }
  phases.client = MicrosSince(start);
  absl::StatusOr<std::vector<KernelSource>> kernels = client::LoadManifestKernels(flags.manifest);
  phases.manifest = MicrosSince(start) - phases.client;
  if (!kernels.ok()) {
    std::fprintf(stderr, "kcache-example-worker: %s\n",
                 std::string(kernels.status().message()).c_str());
    return 2;
  }
  int exit_code = 0;
  std::optional<Node> node = ChooseGpus(flags, &exit_code);
  if (!node) return exit_code;
  phases.gpus = MicrosSince(start) - phases.client - phases.manifest;
  client::NodeKernels got = GetKernels(*kernels, *node, c.get(), local.get());
  phases.kernels = MicrosSince(start) - phases.manifest - phases.gpus - phases.client;
  std::vector<GpuReport> reports = ReportNode(*kernels, *node, got);
  int64_t total = MicrosSince(start);
  if (flags.json) {
    PrintJson(mode, reports, got.devices.size(), total, phases);
  } else {
    PrintText(mode, reports, got.devices.size(), total);
  }
  for (const GpuReport& r : reports) {
    if (r.failed > 0) return 1;
  }
  return 0;
}

}  // namespace kcache::example
