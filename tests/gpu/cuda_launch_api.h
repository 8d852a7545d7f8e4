// The CUDA driver entry points the GPU suite needs beyond libkcache's device.h (device memory,
// copies, launches, the primary context), found with dlopen/dlsym at run time: nothing links
// libcuda, so the suite builds and runs (and skips) on a machine without a driver.
//
// Symbols are the ones cuda.h maps the API names to (cuMemAlloc -> cuMemAlloc_v2, ...).
// cuCtxSynchronize stays unversioned: CUDA 13's cuCtxSynchronize_v2 is a different function
// (it takes a context) that older drivers lack. Types are plain C types of the same layout
// (CUresult -> int, CUdevice -> int, CUdeviceptr -> unsigned long long, handles -> void*).
//
// Header-only so that tests/unit/gpu_launcher_logic_test.cc can check the symbol names against
// the toolkit's stub libcuda without a GPU.
#ifndef KCACHE_TESTS_GPU_CUDA_LAUNCH_API_H_
#define KCACHE_TESTS_GPU_CUDA_LAUNCH_API_H_

#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace kcache::gpu_test {

using CuResult = int;                    // CUresult
using CuDevice = int;                    // CUdevice
using CuDevicePtr = unsigned long long;  // CUdeviceptr (64-bit)
using CuContext = void*;                 // CUcontext
using CuFunction = void*;                // CUfunction, or a CUkernel from cuLibraryGetKernel
using CuStream = void*;                  // CUstream; null = the legacy default stream

inline constexpr CuResult kCuSuccess = 0;
inline constexpr CuResult kCuErrorStubLibrary = 34;  // CUDA_ERROR_STUB_LIBRARY
inline constexpr CuResult kCuErrorNoDevice = 100;    // CUDA_ERROR_NO_DEVICE
inline constexpr int kCuAttrComputeCapabilityMajor = 75;
inline constexpr int kCuAttrComputeCapabilityMinor = 76;

// Function pointers into one opened driver. Members are named after the symbols they hold.
struct LaunchDriver {
  std::string path;  // what was dlopen'd
  CuResult (*cuInit)(unsigned int flags) = nullptr;
  CuResult (*cuDriverGetVersion)(int* version) = nullptr;
  CuResult (*cuDeviceGetCount)(int* count) = nullptr;
  CuResult (*cuDeviceGet)(CuDevice* device, int ordinal) = nullptr;
  CuResult (*cuDeviceGetAttribute)(int* value, int attribute, CuDevice device) = nullptr;
  CuResult (*cuDeviceGetName)(char* name, int length, CuDevice device) = nullptr;
  CuResult (*cuGetErrorName)(CuResult error, const char** text) = nullptr;
  CuResult (*cuGetErrorString)(CuResult error, const char** text) = nullptr;
  CuResult (*cuDevicePrimaryCtxRetain)(CuContext* context, CuDevice device) = nullptr;
  CuResult (*cuDevicePrimaryCtxRelease_v2)(CuDevice device) = nullptr;
  CuResult (*cuCtxSetCurrent)(CuContext context) = nullptr;
  CuResult (*cuCtxSynchronize)() = nullptr;
  CuResult (*cuMemAlloc_v2)(CuDevicePtr* pointer, size_t bytes) = nullptr;
  CuResult (*cuMemFree_v2)(CuDevicePtr pointer) = nullptr;
  CuResult (*cuMemcpyHtoD_v2)(CuDevicePtr destination, const void* source, size_t bytes) = nullptr;
  CuResult (*cuMemcpyDtoH_v2)(void* destination, CuDevicePtr source, size_t bytes) = nullptr;
  CuResult (*cuLaunchKernel)(CuFunction function, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes, CuStream stream,
                             void** kernel_params, void** extra) = nullptr;

  // "CUDA_ERROR_ILLEGAL_ADDRESS (700: an illegal memory access was encountered)".
  std::string ErrorText(CuResult result) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName != nullptr) cuGetErrorName(result, &name);
    if (cuGetErrorString != nullptr) cuGetErrorString(result, &text);
    if (name == nullptr && result == kCuErrorStubLibrary) name = "CUDA_ERROR_STUB_LIBRARY";
    if (name == nullptr && result == kCuErrorNoDevice) name = "CUDA_ERROR_NO_DEVICE";
    return absl::StrCat(name != nullptr ? name : "CUresult", " (", result,
                        text != nullptr ? absl::StrCat(": ", text) : "", ")");
  }
};

// $KCACHE_LIBCUDA when set (as libkcache honours it), else libcuda.so.1.
inline std::string DriverLibraryPath() {
  const char* path = std::getenv("KCACHE_LIBCUDA");
  return path != nullptr && *path != '\0' ? path : "libcuda.so.1";
}

// dlopens `path` and resolves every entry point above; calls nothing. NotFound when the library
// cannot be opened or lacks a symbol (the message names it). The handle is never closed.
inline absl::StatusOr<std::unique_ptr<LaunchDriver>> OpenLaunchDriver(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::NotFoundError(absl::StrCat("cannot load ", path, " (",
                                            error != nullptr ? error : "unknown error",
                                            "): no NVIDIA driver is installed here"));
  }
  auto driver = std::make_unique<LaunchDriver>();
  driver->path = path;
  absl::Status missing;
  auto find = [&](auto& slot, const char* name) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
    if (slot == nullptr && missing.ok()) {
      missing = absl::NotFoundError(
          absl::StrCat(path, " has no ", name, ": it is not a usable CUDA driver"));
    }
  };
#define KCACHE_FIND_CU(symbol) find(driver->symbol, #symbol)
  KCACHE_FIND_CU(cuInit);
  KCACHE_FIND_CU(cuDriverGetVersion);
  KCACHE_FIND_CU(cuDeviceGetCount);
  KCACHE_FIND_CU(cuDeviceGet);
  KCACHE_FIND_CU(cuDeviceGetAttribute);
  KCACHE_FIND_CU(cuDeviceGetName);
  KCACHE_FIND_CU(cuGetErrorName);
  KCACHE_FIND_CU(cuGetErrorString);
  KCACHE_FIND_CU(cuDevicePrimaryCtxRetain);
  KCACHE_FIND_CU(cuDevicePrimaryCtxRelease_v2);
  KCACHE_FIND_CU(cuCtxSetCurrent);
  KCACHE_FIND_CU(cuCtxSynchronize);
  KCACHE_FIND_CU(cuMemAlloc_v2);
  KCACHE_FIND_CU(cuMemFree_v2);
  KCACHE_FIND_CU(cuMemcpyHtoD_v2);
  KCACHE_FIND_CU(cuMemcpyDtoH_v2);
  KCACHE_FIND_CU(cuLaunchKernel);
#undef KCACHE_FIND_CU
  if (!missing.ok()) return missing;
  return driver;
}

// The GPU the suite runs on (ordinal 0 of what the driver shows; pick another card with
// CUDA_VISIBLE_DEVICES).
struct GpuProbe {
  std::unique_ptr<LaunchDriver> driver;
  CuDevice device = 0;
  int ordinal = 0;
  int sm_major = 0;
  int sm_minor = 0;
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
  std::string name;
  int arch() const { return sm_major * 10 + sm_minor; }
};

// Opens the driver, runs cuInit and reads device 0. NotFound (the reason to skip) when there is
// no driver, the driver is the toolkit's stub library, or it sees no GPU; Unavailable with the
// driver's message for any other failure (a broken driver on a GPU machine is a failure).
inline absl::StatusOr<GpuProbe> ProbeGpu(const std::string& path = DriverLibraryPath()) {
  absl::StatusOr<std::unique_ptr<LaunchDriver>> opened = OpenLaunchDriver(path);
  if (!opened.ok()) return opened.status();
  GpuProbe probe;
  probe.driver = std::move(*opened);
  const LaunchDriver& cu = *probe.driver;
  CuResult r = cu.cuInit(0);
  if (r == kCuErrorStubLibrary) {
    return absl::NotFoundError(absl::StrCat(
        path, " is the CUDA toolkit's stub library, not a driver (cuInit: ", cu.ErrorText(r), ")"));
  }
  if (r == kCuErrorNoDevice) {
    return absl::NotFoundError(
        absl::StrCat("the CUDA driver sees no GPU (cuInit: ", cu.ErrorText(r), ")"));
  }
  if (r != kCuSuccess) {
    return absl::UnavailableError(absl::StrCat("cuInit failed: ", cu.ErrorText(r)));
  }
  int count = 0;
  if (r = cu.cuDeviceGetCount(&count); r != kCuSuccess) {
    return absl::UnavailableError(absl::StrCat("cuDeviceGetCount failed: ", cu.ErrorText(r)));
  }
  if (count == 0) return absl::NotFoundError("the CUDA driver sees no GPU (0 devices)");
  if (r = cu.cuDeviceGet(&probe.device, probe.ordinal); r != kCuSuccess) {
    return absl::UnavailableError(absl::StrCat("cuDeviceGet(0) failed: ", cu.ErrorText(r)));
  }
  if (r = cu.cuDeviceGetAttribute(&probe.sm_major, kCuAttrComputeCapabilityMajor, probe.device);
      r != kCuSuccess) {
    return absl::UnavailableError(absl::StrCat("cuDeviceGetAttribute failed: ", cu.ErrorText(r)));
  }
  if (r = cu.cuDeviceGetAttribute(&probe.sm_minor, kCuAttrComputeCapabilityMinor, probe.device);
      r != kCuSuccess) {
    return absl::UnavailableError(absl::StrCat("cuDeviceGetAttribute failed: ", cu.ErrorText(r)));
  }
  if (r = cu.cuDriverGetVersion(&probe.driver_version); r != kCuSuccess) {
    return absl::UnavailableError(absl::StrCat("cuDriverGetVersion failed: ", cu.ErrorText(r)));
  }
  char name[256] = {};
  if (cu.cuDeviceGetName(name, sizeof(name) - 1, probe.device) == kCuSuccess) probe.name = name;
  return probe;
}

// A GPU test binary's start (its main, after listing its tests, which needs no GPU): the probe
// of the GPU it runs on. Exits 125, saying why, without one (NotFound from ProbeGpu), and 1 when
// the driver is there but fails.
inline GpuProbe ProbeGpuOrExit() {
  absl::StatusOr<GpuProbe> probe = ProbeGpu();
  if (probe.ok()) return *std::move(probe);
  if (absl::IsNotFound(probe.status())) {
    std::printf("no GPU: %s; skipping\n", std::string(probe.status().message()).c_str());
    std::exit(125);
  }
  std::fprintf(stderr, "the CUDA driver is present but failed: %s\n",
               std::string(probe.status().message()).c_str());
  std::exit(1);
}

}  // namespace kcache::gpu_test

#endif  // KCACHE_TESTS_GPU_CUDA_LAUNCH_API_H_
