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
  std::string uuid;  // "GPU-8f2c...", or "MIG-..." for a MIG instance named so; "" when unknown
  // The CUDA_VISIBLE_DEVICES entry that selected this GPU ("1", "GPU-8f2c", "MIG-..."); "" when
  // the variable is unset or its entries cannot be matched to the GPUs one to one.
  std::string visible_as;
};

// Every GPU the process sees, in the driver's ordinal order: the driver applies
// CUDA_VISIBLE_DEVICES (indices, GPU UUIDs, MIG instances), and each GPU is labelled with the
// entry that selected it. NotFound when there is no driver (libcuda.so.1 cannot be loaded, or
// it is the toolkit's stub library) or when the driver sees no GPU (the message says when
// CUDA_VISIBLE_DEVICES hides them); Unavailable for any other driver failure, with the driver's
// own message. Thread-safe; the driver is loaded and initialized once per process.
absl::StatusOr<std::vector<GpuInfo>> DetectDevices();

// OK when `kernel` runs on `gpu` by the serving rules (docs/serving-rules.md: exact SASS,
// compatible SASS, PTX at or below the GPU) and its driver loads it (min_driver; a driver of 0
// is not checked). Otherwise FailedPrecondition naming the kernel, its target, the GPU and what
// to do ("softmax is sm_89 SASS; GPU 0 is NVIDIA H100 (sm_90): resolve it for 9.0 ..."), or
// InvalidArgument for LTO-IR. Pure (no driver): a caller may check a GPU it only describes.
absl::Status CheckRunsOn(const FetchedKernel& kernel, const GpuInfo& gpu);

// The kernel entry points of a fetched cubin or PTX (extern "C" names and lowered names), as
// LoadedModule::Load looks them up. InvalidArgument for LTO-IR or bytes that do not parse.
absl::StatusOr<std::vector<std::string>> EntryPoints(const FetchedKernel& kernel);

// cuDriverGetVersion (e.g. 13000), or NotFound as above.
absl::StatusOr<uint32_t> DriverVersion();

// A fetched kernel loaded into a GPU's primary context (cuLibraryLoadData when the driver has
// it, else cuModuleLoadData on the primary context). PTX is JIT-compiled by the driver here.
// Unloaded on destruction. Not copyable; Function() is thread-safe.
class LoadedModule {
 public:
  // Before loading, checks that the kernel runs on the GPU at `ordinal` (CheckRunsOn: a wrong
  // image fails here, naming the kernel, its target and the GPU); after loading, looks up
  // every entry point (EntryPoints) on that GPU, so a kernel that cannot run fails here and
  // never at its first launch.
  // NotFound without a driver; InvalidArgument for LTO-IR (link it first) or an ordinal the
  // process does not see; FailedPrecondition when the kernel does not run on the GPU;
  // Unavailable with the driver's message and JIT log when the driver refuses the image or an
  // entry point.
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
  void* context_ = nullptr;  // the retained primary context (released on destruction)
  int device_ = 0;           // CUdevice of the GPU it was loaded for
  int64_t load_micros_ = 0;
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_INCLUDE_KCACHE_DEVICE_H_
