// A node's GPUs in one call (kcache/node.h): one batch per distinct device, run at once.
#include "kcache/node.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/lib/api_convert.h"

namespace kcache::client {

std::vector<Device> DistinctDevices(const std::vector<GpuInfo>& gpus,
                                    std::vector<size_t>* device_of_gpu) {
  std::vector<Device> devices;
  device_of_gpu->clear();
  for (const GpuInfo& gpu : gpus) {
    size_t d = 0;
    while (d < devices.size() && !(devices[d].sm_major == gpu.device.sm_major &&
                                   devices[d].sm_minor == gpu.device.sm_minor &&
                                   devices[d].driver_version == gpu.device.driver_version)) {
      ++d;
    }
    if (d == devices.size()) devices.push_back(gpu.device);
    device_of_gpu->push_back(d);
  }
  return devices;
}

std::vector<GpuInfo> PretendGpus(const std::vector<Device>& devices) {
  std::vector<GpuInfo> gpus;
  for (size_t i = 0; i < devices.size(); ++i) {
    GpuInfo gpu;
    gpu.ordinal = static_cast<int>(i);
    gpu.device = devices[i];
    gpu.name = absl::StrCat("pretend sm_", devices[i].arch());
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

namespace {

// The kernels for one device: those given by source outside the device's declared arch range
// answered here (NotFound, as the daemon would), the rest in one batch.
std::vector<absl::StatusOr<FetchedKernel>> ResolveForDevice(Client& client,
                                                            const std::vector<KernelRef>& kernels,
                                                            const Device& device,
                                                            const CallOptions& call) {
  std::vector<absl::StatusOr<FetchedKernel>> results(kernels.size(),
                                                     absl::InternalError("no result"));
  std::vector<KernelRef> asked;
  std::vector<size_t> index;  // asked[i] is kernels[index[i]]
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (kernels[k].by == KernelRef::By::kSource) {
      if (absl::Status s = CheckArchRange(kernels[k].source, device); !s.ok()) {
        results[k] = s;
        continue;
      }
    }
    asked.push_back(kernels[k]);
    index.push_back(k);
  }
  if (asked.empty()) return results;
  CallOptions asking = call;  // progress names the kernel by its place in `kernels`
  if (call.on_progress) {
    asking.on_progress = [&](const CompileProgress& progress) {
      CompileProgress mapped = progress;
      mapped.index = index[progress.index];
      call.on_progress(mapped);
    };
  }
  client.ResolveMany(
      asked, device,
      [&](size_t i, absl::StatusOr<FetchedKernel> result) {
        results[index[i]] = std::move(result);
      },
      asking);
  return results;
}

}  // namespace

NodeKernels ResolveForGpus(Client& client, const std::vector<KernelRef>& kernels,
                           const std::vector<GpuInfo>& gpus, const CallOptions& call) {
  NodeKernels node;
  node.gpus = gpus;
  node.devices = DistinctDevices(gpus, &node.device_of_gpu);
  node.kernels.resize(node.devices.size());
  std::vector<std::thread> others;
  for (size_t d = 1; d < node.devices.size(); ++d) {
    others.emplace_back(
        [&, d] { node.kernels[d] = ResolveForDevice(client, kernels, node.devices[d], call); });
  }
  if (!node.devices.empty()) {
    node.kernels[0] = ResolveForDevice(client, kernels, node.devices[0], call);
  }
  for (std::thread& t : others) t.join();
  return node;
}

absl::StatusOr<NodeKernels> ResolveForNode(Client& client, const std::vector<KernelRef>& kernels,
                                           const CallOptions& call) {
  absl::StatusOr<std::vector<GpuInfo>> gpus = DetectDevices();
  if (!gpus.ok()) return gpus.status();
  return ResolveForGpus(client, kernels, *gpus, call);
}

std::vector<GpuModules> LoadForNode(const NodeKernels& node) {
  std::vector<GpuModules> modules(node.gpus.size());
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    for (const absl::StatusOr<FetchedKernel>& kernel : node.ForGpu(g)) {
      if (!kernel.ok()) {
        modules[g].push_back(kernel.status());
        continue;
      }
      modules[g].push_back(LoadedModule::Load(*kernel, node.gpus[g].ordinal));
    }
  }
  return modules;
}

}  // namespace kcache::client
