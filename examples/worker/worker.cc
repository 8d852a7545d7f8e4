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
#include "core/manifest.h"
#include "kcache/device.h"
#include "kcache/kcache.h"

namespace kcache::example {
namespace {

using client::Device;
using client::FetchedKernel;
using client::KernelSource;

using Clock = std::chrono::steady_clock;

int64_t MicrosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

std::string ArchText(int arch) {
  return arch == 0 ? std::string() : absl::StrCat(arch / 10, ".", arch % 10);
}

std::string Ms(int64_t micros) { return absl::StrFormat("%.1f ms", micros / 1e3); }

// The device to resolve for, and the GPU to load on (if any).
struct StartDevice {
  Device device;
  std::optional<client::GpuInfo> gpu;  // set when kernels can be loaded
  std::string note;                    // how the device was chosen
};

std::optional<StartDevice> ChooseDevice(const WorkerFlags& flags, int* exit_code) {
  absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
  StartDevice t;
  if (flags.device.empty()) {
    if (!gpus.ok()) {
      std::fprintf(stderr,
                   "kcache-example-worker: no GPU to start on: %s\n"
                   "(pass --device 8.9 to resolve the kernels for a device anyway)\n",
                   std::string(gpus.status().message()).c_str());
      *exit_code = 2;
      return std::nullopt;
    }
    t.gpu = gpus->front();
    t.device = t.gpu->device;
    t.note = absl::StrCat("GPU 0: ", t.gpu->name);
    return t;
  }
  absl::StatusOr<Device> device = Device::Parse(flags.device, flags.driver);
  if (!device.ok()) {
    std::fprintf(stderr, "kcache-example-worker: --device: %s\n",
                 std::string(device.status().message()).c_str());
    *exit_code = 2;
    return std::nullopt;
  }
  t.device = *device;
  t.note = "--device";
  if (gpus.ok()) {
    if (t.device.driver_version == 0) t.device.driver_version = gpus->front().device.driver_version;
    if (gpus->front().device.arch() == t.device.arch()) t.gpu = gpus->front();
  }
  if (!t.gpu) {
    absl::StrAppend(&t.note, gpus.ok() ? "; the GPU is another SM: kernels are not loaded"
                                       : "; no GPU: kernels are not loaded");
  }
  return t;
}

struct KernelReport {
  std::string name;
  std::string outcome;  // "served", "skipped", "failed"
  std::string target, kind, rule, served_from, reason;
  uint64_t bytes = 0;
  int64_t resolve_micros = 0;
  int64_t load_micros = -1;  // -1: not loaded
};

// Why the worker does not want `source` on this device, or "" when it does.
std::string SkipReason(const KernelSource& source, const StartDevice& target) {
  bool in_range = (source.min_arch == 0 || target.device.arch() >= source.min_arch) &&
                  (source.max_arch == 0 || target.device.arch() <= source.max_arch);
  if (in_range) return "";
  return absl::StrCat("its arch range ", ArchText(source.min_arch), "..", ArchText(source.max_arch),
                      " excludes ", target.device.ToString());
}

// Reports one kernel that was resolved (and loads it when there is a GPU).
KernelReport Report(const std::string& name, const absl::StatusOr<FetchedKernel>& k,
                    int64_t resolve_micros, const StartDevice& target) {
  KernelReport r;
  r.name = name;
  r.resolve_micros = resolve_micros;
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
  if (target.gpu) {
    absl::StatusOr<std::unique_ptr<client::LoadedModule>> module =
        client::LoadedModule::Load(*k, target.gpu->ordinal);
    if (!module.ok()) {
      r.outcome = "failed";
      r.reason = absl::StrCat("load: ", module.status().message());
      return r;
    }
    for (const auto& [expr, lowered] : k->lowered_names) {
      if (absl::StatusOr<void*> f = (*module)->Function(lowered); !f.ok()) {
        r.outcome = "failed";
        r.reason = absl::StrCat("load: ", f.status().message());
      }
    }
    r.load_micros = (*module)->load_micros();
  }
  return r;
}

// Every kernel of the manifest: from kcached in one batch (`c`), or compiled here (`local`).
std::vector<KernelReport> GetKernels(const std::vector<KernelSource>& kernels,
                                     const StartDevice& target, client::Client* c,
                                     client::LocalCompiler* local) {
  std::vector<KernelReport> reports(kernels.size());
  std::vector<client::KernelRef> wanted;
  std::vector<size_t> wanted_index;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (std::string skip = SkipReason(kernels[i], target); !skip.empty()) {
      reports[i] = KernelReport{.name = kernels[i].name, .outcome = "skipped", .reason = skip};
      continue;
    }
    if (local != nullptr) {
      Clock::time_point start = Clock::now();
      absl::StatusOr<FetchedKernel> k = local->Compile(kernels[i], target.device);
      reports[i] = Report(kernels[i].name, k, MicrosSince(start), target);
      continue;
    }
    wanted.push_back(kernels[i]);
    wanted_index.push_back(i);
  }
  if (c == nullptr || wanted.empty()) return reports;
  // One call: the daemon answers what it holds at once and the compiles as they finish; each
  // kernel's time is from the start of the batch to its answer.
  c->ResolveMany(wanted, target.device, [&](size_t k, absl::StatusOr<FetchedKernel> result) {
    size_t i = wanted_index[k];
    int64_t micros = result.ok() ? result->micros : 0;
    reports[i] = Report(kernels[i].name, result, micros, target);
  });
  return reports;
}

void PrintText(const WorkerFlags& flags, const StartDevice& target, const std::string& mode,
               const std::vector<KernelReport>& reports, int64_t total_micros) {
  std::printf("device %s (driver %u; %s)\n", target.device.ToString().c_str(),
              target.device.driver_version, target.note.c_str());
  std::printf("kernels from %s\n", mode.c_str());
  std::map<std::string, int> by_source;
  int failed = 0, skipped = 0;
  for (const KernelReport& r : reports) {
    if (r.outcome == "served") {
      ++by_source[r.served_from];
      std::printf("  %-28s %-10s %-6s %-15s %-19s %9s%s\n", r.name.c_str(), r.target.c_str(),
                  r.kind.c_str(), r.rule.c_str(), r.served_from.c_str(),
                  Ms(r.resolve_micros).c_str(),
                  r.load_micros >= 0 ? absl::StrCat("  load ", Ms(r.load_micros)).c_str() : "");
    } else {
      (r.outcome == "failed" ? failed : skipped)++;
      std::printf("  %-28s %s: %s\n", r.name.c_str(), r.outcome.c_str(), r.reason.c_str());
    }
  }
  std::string sources;
  for (const auto& [from, n] : by_source)
    absl::StrAppend(&sources, sources.empty() ? "" : ", ", n, " ", from);
  std::printf("total %zu kernels in %s (%s; %d skipped, %d failed)\n", reports.size(),
              Ms(total_micros).c_str(), sources.empty() ? "none served" : sources.c_str(), skipped,
              failed);
}

void PrintJson(const StartDevice& target, const std::string& mode,
               const std::vector<KernelReport>& reports, int64_t total_micros) {
  nlohmann::json kernels = nlohmann::json::array();
  int failed = 0;
  for (const KernelReport& r : reports) {
    if (r.outcome == "failed") ++failed;
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
  nlohmann::json out = {{"device", target.device.ToString()},
                        {"driver", target.device.driver_version},
                        {"gpu", target.gpu ? nlohmann::json(target.gpu->name) : nlohmann::json()},
                        {"mode", mode},
                        {"kernels", kernels},
                        {"failed", failed},
                        {"total_micros", total_micros}};
  std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace

int RunWorker(const WorkerFlags& flags) {
  Clock::time_point start = Clock::now();
  absl::StatusOr<std::vector<KernelSource>> kernels = client::LoadManifestKernels(flags.manifest);
  if (!kernels.ok()) {
    std::fprintf(stderr, "kcache-example-worker: %s\n",
                 std::string(kernels.status().message()).c_str());
    return 2;
  }
  int exit_code = 0;
  std::optional<StartDevice> target = ChooseDevice(flags, &exit_code);
  if (!target) return exit_code;

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
  std::vector<KernelReport> reports = GetKernels(*kernels, *target, c.get(), local.get());
  int64_t total = MicrosSince(start);
  if (flags.json) {
    PrintJson(*target, mode, reports, total);
  } else {
    PrintText(flags, *target, mode, reports, total);
  }
  for (const KernelReport& r : reports) {
    if (r.outcome == "failed") return 1;
  }
  return 0;
}

}  // namespace kcache::example
