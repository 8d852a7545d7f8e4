// The C ABI's mixed-GPU calls (kcache_c.h, "Mixed-GPU nodes") over kcache/device.h and
// kcache/node.h.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "client/lib/c_api_internal.h"
#include "kcache/device.h"
#include "kcache/kcache_c.h"
#include "kcache/node.h"

namespace {

using kcache::client::Device;
using kcache::client::GpuInfo;
using kcache::client::c_api::Fail;
using kcache::client::c_api::FailWith;
using kcache::client::c_api::Succeed;

template <size_t N>
void CopyText(const std::string& text, char (&out)[N]) {
  size_t n = std::min(text.size(), N - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

template <size_t N>
std::string TextOf(const char (&in)[N]) {
  return std::string(in, strnlen(in, N));
}

kcache_gpu ToC(const GpuInfo& gpu) {
  kcache_gpu out{};
  out.ordinal = gpu.ordinal;
  out.device = kcache_device{gpu.device.sm_major, gpu.device.sm_minor, gpu.device.driver_version};
  CopyText(gpu.name, out.name);
  CopyText(gpu.uuid, out.uuid);
  CopyText(gpu.visible_as, out.visible_as);
  return out;
}

GpuInfo FromC(const kcache_gpu& gpu) {
  GpuInfo out;
  out.ordinal = gpu.ordinal;
  out.device = Device{gpu.device.sm_major, gpu.device.sm_minor, gpu.device.driver_version};
  out.name = TextOf(gpu.name);
  out.uuid = TextOf(gpu.uuid);
  out.visible_as = TextOf(gpu.visible_as);
  return out;
}

char* NewCString(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

}  // namespace

extern "C" {

int kcache_detect_gpus(kcache_gpu* gpus, int capacity, int* count) {
  if (count != nullptr) *count = 0;
  absl::StatusOr<std::vector<GpuInfo>> found = kcache::client::DetectDevices();
  if (!found.ok()) return Fail(found.status());
  for (int i = 0; i < static_cast<int>(found->size()) && i < capacity && gpus != nullptr; ++i) {
    gpus[i] = ToC((*found)[i]);
  }
  if (count != nullptr) *count = static_cast<int>(found->size());
  return Succeed();
}

int kcache_kernel_check_gpu(const kcache_kernel* kernel, const kcache_gpu* gpu) {
  if (kernel == nullptr || gpu == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT, "kernel and gpu must not be NULL");
  }
  if (absl::Status s = kcache::client::CheckRunsOn(kernel->kernel, FromC(*gpu)); !s.ok()) {
    return Fail(s);
  }
  return Succeed();
}

int kcache_kernel_entry_points(const kcache_kernel* kernel, char** names) {
  if (kernel == nullptr || names == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT, "kernel and names must not be NULL");
  }
  *names = nullptr;
  absl::StatusOr<std::vector<std::string>> entries = kcache::client::EntryPoints(kernel->kernel);
  if (!entries.ok()) return Fail(entries.status());
  *names = NewCString(absl::StrJoin(*entries, "\n"));
  return Succeed();
}

int kcache_resolve_for_gpus(kcache_client* client, const kcache_kernel_ref* kernels, size_t count,
                            const kcache_gpu* gpus, size_t num_gpus, size_t* device_of_gpu,
                            kcache_resolve_for_gpus_callback callback, void* context) {
  if (client == nullptr || (kernels == nullptr && count > 0) || gpus == nullptr ||
      device_of_gpu == nullptr || callback == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT,
                    "client, kernels, gpus, device_of_gpu and callback must not be NULL");
  }
  std::vector<kcache::client::KernelRef> refs;
  if (absl::Status s = kcache::client::c_api::ToRefs(kernels, count, &refs); !s.ok()) {
    return Fail(s);
  }
  std::vector<GpuInfo> infos;
  for (size_t g = 0; g < num_gpus; ++g) infos.push_back(FromC(gpus[g]));
  kcache::client::NodeKernels node =
      kcache::client::ResolveForGpus(*client->client, refs, infos, client->call);
  // Each distinct device is reported under the first GPU that has it.
  std::vector<size_t> first_gpu(node.devices.size(), 0);
  for (size_t g = num_gpus; g-- > 0;) first_gpu[node.device_of_gpu[g]] = g;
  for (size_t g = 0; g < num_gpus; ++g) device_of_gpu[g] = first_gpu[node.device_of_gpu[g]];
  for (size_t d = 0; d < node.devices.size(); ++d) {
    for (size_t i = 0; i < node.kernels[d].size(); ++i) {
      absl::StatusOr<kcache::client::FetchedKernel>& result = node.kernels[d][i];
      if (result.ok()) {
        callback(context, first_gpu[d], i, KCACHE_OK, "",
                 kcache::client::c_api::NewKernel(*std::move(result)));
      } else {
        std::string message(result.status().message());
        callback(context, first_gpu[d], i, static_cast<int>(result.status().code()),
                 message.c_str(), nullptr);
      }
    }
  }
  return Succeed();
}

}  // extern "C"
