// Running one Problem (launch_plan.h) on the GPU: device buffers for every pointer argument
// (each followed by a red zone the kernel must leave alone), one cuLaunchKernel with the
// table's grid / block / shared memory in the calling thread's current context, a synchronize,
// and every buffer read back. Header-only; needs a GPU to do anything.
#ifndef KCACHE_TESTS_GPU_GPU_LAUNCHER_H_
#define KCACHE_TESTS_GPU_GPU_LAUNCHER_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/gpu/cuda_launch_api.h"
#include "tests/gpu/launch_plan.h"

namespace kcache::gpu_test {

inline constexpr size_t kRedZoneBytes = 256;
inline constexpr uint8_t kRedZoneByte = 0x5a;

// One cuMemAlloc'd buffer, freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const LaunchDriver& cu) : cu_(&cu) {}
  ~DeviceBuffer() {
    if (address_ != 0) cu_->cuMemFree_v2(address_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : cu_(other.cu_), address_(other.address_), bytes_(other.bytes_) {
    other.address_ = 0;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;

  // Allocates host.size() bytes and copies `host` in.
  absl::Status Upload(const std::vector<uint8_t>& host, const std::string& what) {
    bytes_ = host.size();
    if (CuResult r = cu_->cuMemAlloc_v2(&address_, bytes_); r != kCuSuccess) {
      address_ = 0;
      return absl::ResourceExhaustedError(absl::StrCat("cuMemAlloc of ", bytes_, " bytes for '",
                                                       what, "' failed: ", cu_->ErrorText(r)));
    }
    if (CuResult r = cu_->cuMemcpyHtoD_v2(address_, host.data(), bytes_); r != kCuSuccess) {
      return absl::InternalError(
          absl::StrCat("cuMemcpyHtoD of '", what, "' failed: ", cu_->ErrorText(r)));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<uint8_t>> Download(const std::string& what) const {
    std::vector<uint8_t> host(bytes_);
    if (CuResult r = cu_->cuMemcpyDtoH_v2(host.data(), address_, bytes_); r != kCuSuccess) {
      return absl::InternalError(
          absl::StrCat("cuMemcpyDtoH of '", what, "' failed: ", cu_->ErrorText(r)));
    }
    return host;
  }
  CuDevicePtr address() const { return address_; }

 private:
  const LaunchDriver* cu_;
  CuDevicePtr address_ = 0;
  size_t bytes_ = 0;
};

struct LaunchTiming {
  int64_t launch_micros = 0;  // cuLaunchKernel + cuCtxSynchronize (a lazily loaded module
                              // is loaded into the context by its first launch)
};

// Launches `function` (a CUfunction or CUkernel) on `input` in the current context and returns
// the problem as the GPU left it: every pointer argument read back (inputs too, so a caller can
// check they were not written). Errors: the launch or synchronize failing (after a kernel fault
// the context is unusable for the rest of the process), or a red zone written.
inline absl::StatusOr<Problem> LaunchOnGpu(const LaunchDriver& cu, CuFunction function,
                                           const Problem& input, LaunchTiming* timing = nullptr) {
  absl::StatusOr<LaunchDims> dims = PlanLaunch(input);
  if (!dims.ok()) return dims.status();
  const launch::EntryPoint& entry = *input.entry;
  std::vector<DeviceBuffer> buffers;
  std::vector<uint64_t> addresses(entry.num_params, 0);
  buffers.reserve(entry.num_params);
  for (size_t k = 0; k < entry.num_params; ++k) {
    buffers.emplace_back(cu);
    const Tensor& t = input.tensors[k];
    if (entry.params[k].arg != launch::Arg::kPointer || t.null) continue;
    std::vector<uint8_t> host = t.DeviceBytes();
    host.insert(host.end(), kRedZoneBytes, kRedZoneByte);
    if (absl::Status s = buffers[k].Upload(host, entry.params[k].name); !s.ok()) return s;
    addresses[k] = buffers[k].address();
  }
  KernelArgs args = BuildKernelArgs(input, addresses);

  auto start = std::chrono::steady_clock::now();
  CuResult r = cu.cuLaunchKernel(function, dims->grid[0], dims->grid[1], dims->grid[2],
                                 dims->block[0], dims->block[1], dims->block[2], dims->shared_bytes,
                                 nullptr, args.params.data(), nullptr);
  if (r != kCuSuccess) {
    return absl::InternalError(absl::StrCat(
        "cuLaunchKernel(", entry.symbol, ", grid ", dims->grid[0], "x", dims->grid[1], "x",
        dims->grid[2], ", block ", dims->block[0], ") failed: ", cu.ErrorText(r)));
  }
  if (r = cu.cuCtxSynchronize(); r != kCuSuccess) {
    return absl::InternalError(
        absl::StrCat(entry.symbol, " failed on the GPU: ", cu.ErrorText(r),
                     " (the context is now unusable: later tests in this process fail too)"));
  }
  if (timing != nullptr) {
    timing->launch_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
  }

  Problem got = input;
  for (size_t k = 0; k < entry.num_params; ++k) {
    if (addresses[k] == 0) continue;
    const std::string name = entry.params[k].name;
    absl::StatusOr<std::vector<uint8_t>> host = buffers[k].Download(name);
    if (!host.ok()) return host.status();
    const size_t data_bytes = host->size() - kRedZoneBytes;
    for (size_t b = data_bytes; b < host->size(); ++b) {
      if ((*host)[b] != kRedZoneByte) {
        return absl::InternalError(absl::StrCat(entry.symbol, " wrote past the end of '", name,
                                                "' (", input.tensors[k].size(), " elements): byte ",
                                                b - data_bytes, " after the end changed"));
      }
    }
    host->resize(data_bytes);
    got.tensors[k] = Tensor::FromDeviceBytes(entry.params[k].elem, *host);
  }
  return got;
}

}  // namespace kcache::gpu_test

#endif  // KCACHE_TESTS_GPU_GPU_LAUNCHER_H_
