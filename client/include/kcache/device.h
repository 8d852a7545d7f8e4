// Finding the GPU a worker runs on and loading fetched kernels onto it, through the CUDA
// driver opened with dlopen("libcuda.so.1") on first use. Nothing links libcuda: on a machine
// without a driver these calls return NotFound ("no CUDA driver ...") and never crash.
#ifndef KCACHE_CLIENT_INCLUDE_KCACHE_DEVICE_H_
#define KCACHE_CLIENT_INCLUDE_KCACHE_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kcache/kcache.h"

namespace kcache::client {

struct GpuInfo {
  int ordinal = 0;   // CUDA device ordinal
  std::string name;  // cuDeviceGetName, e.g. "NVIDIA H100 80GB HBM3"
  Device device;     // compute capability and the driver's version
};

// Every GPU the driver sees, in ordinal order. NotFound when there is no driver (libcuda.so.1
// cannot be loaded, or it is the toolkit's stub library) or when the driver sees no GPU;
// Unavailable for any other driver failure, with the driver's own message. Thread-safe; the
// driver is loaded and initialized once per process.
absl::StatusOr<std::vector<GpuInfo>> DetectDevices();

// cuDriverGetVersion (e.g. 13000), or NotFound as above.
absl::StatusOr<uint32_t> DriverVersion();

// A fetched kernel loaded into a GPU's primary context (cuLibraryLoadData when the driver has
// it, else cuModuleLoadData on the primary context). PTX is JIT-compiled by the driver here.
// Unloaded on destruction. Not copyable; Function() is thread-safe.
class LoadedModule {
 public:
  // NotFound without a driver; InvalidArgument for LTO-IR (link it first); Unavailable with
  // the driver's message and JIT log when the driver refuses the image.
  static absl::StatusOr<std::unique_ptr<LoadedModule>> Load(const FetchedKernel& kernel,
                                                            int ordinal = 0);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  // The kernel named `symbol` (an extern "C" name, or a lowered name from
  // FetchedKernel::LoweredName) as an opaque handle that cuLaunchKernel accepts (a CUkernel
  // or a CUfunction). NotFound when the module has no such kernel.
  absl::StatusOr<void*> Function(absl::string_view symbol) const;

  int64_t load_micros() const { return load_micros_; }

 private:
  LoadedModule() = default;
  void* library_ = nullptr;  // CUlibrary, or null when the module API was used
  void* module_ = nullptr;   // CUmodule
  void* context_ = nullptr;  // the retained primary context (module API only)
  int device_ = 0;           // CUdevice whose primary context was retained
  int64_t load_micros_ = 0;
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_INCLUDE_KCACHE_DEVICE_H_
