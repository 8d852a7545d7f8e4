// A node's GPUs in one call: the kernels a worker needs for every GPU it drives, resolved once
// per distinct device (SM and driver), not once per GPU, and loaded onto each GPU from the
// artifact of its own SM. A node with a 7.5 and an 8.6 GPU gets an sm_75 and an sm_86 cubin;
// two 8.9 GPUs share one.
//
//   auto node = kcache::client::ResolveForNode(*client, kernels);   // every visible GPU
//   auto modules = kcache::client::LoadForNode(*node);               // modules[gpu][kernel]
#ifndef KCACHE_CLIENT_INCLUDE_KCACHE_NODE_H_
#define KCACHE_CLIENT_INCLUDE_KCACHE_NODE_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kcache/device.h"
#include "kcache/kcache.h"

namespace kcache::client {

struct NodeKernels {
  std::vector<GpuInfo> gpus;          // the GPUs, as given (or detected)
  std::vector<Device> devices;        // the distinct devices, in the order of their first GPU
  std::vector<size_t> device_of_gpu;  // gpus[g] runs the artifacts of devices[device_of_gpu[g]]
  // kernels[d][k]: kernel k of the request for devices[d] (as Client::ResolveMany answers it).
  std::vector<std::vector<absl::StatusOr<FetchedKernel>>> kernels;

  // The kernels GPU g runs: kernels[device_of_gpu[g]]. g must be below gpus.size().
  const std::vector<absl::StatusOr<FetchedKernel>>& ForGpu(size_t g) const {
    return kernels[device_of_gpu[g]];
  }
};

// The distinct devices (SM and driver) of `gpus`, in the order of their first GPU, and for each
// GPU the index of its device in them.
std::vector<Device> DistinctDevices(const std::vector<GpuInfo>& gpus,
                                    std::vector<size_t>* device_of_gpu);

// GPUs that are not there, for resolving as if they were (a build machine, a test): ordinal i is
// devices[i], named "pretend sm_XY".
std::vector<GpuInfo> PretendGpus(const std::vector<Device>& devices);

// Resolves `kernels` for every GPU of `gpus`: one Client::ResolveMany per distinct device, all
// at once (each on its own thread; the calling thread takes the first), so the call lasts as
// long as the slowest device's batch. Every result is what ResolveMany gives for that device
// (fail-open included), except that a kernel given by source whose declared min/max arch
// excludes the device is answered NotFound at once, without a request. Thread-safe as Client
// is.
NodeKernels ResolveForGpus(Client& client, const std::vector<KernelRef>& kernels,
                           const std::vector<GpuInfo>& gpus, const CallOptions& call = {});

// ResolveForGpus for every GPU the process sees (DetectDevices: the driver's order,
// CUDA_VISIBLE_DEVICES and MIG instances applied). DetectDevices' error when there is none.
absl::StatusOr<NodeKernels> ResolveForNode(Client& client, const std::vector<KernelRef>& kernels,
                                           const CallOptions& call = {});

// Each GPU's modules: modules[g][k] is LoadedModule::Load of node.ForGpu(g)[k] on GPU
// node.gpus[g].ordinal (the load check and every entry point included), or why not (the
// resolve's error, or the load's).
using GpuModules = std::vector<absl::StatusOr<std::unique_ptr<LoadedModule>>>;
std::vector<GpuModules> LoadForNode(const NodeKernels& node);

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_INCLUDE_KCACHE_NODE_H_
