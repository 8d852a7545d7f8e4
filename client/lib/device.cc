// DetectDevices and LoadedModule over the dlopen'd driver (cuda_driver.h).
#include "kcache/device.h"

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/lib/cuda_driver.h"

namespace kcache::client {
namespace {

absl::Status DriverFailed(const DriverApi& api, CuResult r, absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, " failed: ", api.ErrorText(r)));
}

int64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// Loads with the module API on the device's primary context, keeping the JIT error log.
// `image`: a cubin, or NUL-terminated PTX.
absl::Status LoadModule(const DriverApi& api, const char* image, int device, void** context,
                        void** module) {
  if (CuResult r = api.primary_ctx_retain(context, device); r != kCudaSuccess) {
    return DriverFailed(api, r, "cuDevicePrimaryCtxRetain");
  }
  if (CuResult r = api.ctx_push_current(*context); r != kCudaSuccess) {
    api.primary_ctx_release(device);
    *context = nullptr;
    return DriverFailed(api, r, "cuCtxPushCurrent");
  }
  std::string log(8192, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  CuResult r = api.module_load_data_ex(module, image, 2, options, values);
  void* popped = nullptr;
  api.ctx_pop_current(&popped);
  if (r != kCudaSuccess) {
    api.primary_ctx_release(device);
    *context = nullptr;
    log.resize(log.find('\0'));
    return absl::UnavailableError(absl::StrCat(
        "the CUDA driver refused the module: ", api.ErrorText(r), log.empty() ? "" : "\n", log));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<GpuInfo>> DetectDevices() {
  absl::StatusOr<const DriverApi*> driver = InitializedDriver();
  if (!driver.ok()) return driver.status();
  const DriverApi& api = **driver;
  int version = 0;
  if (CuResult r = api.driver_get_version(&version); r != kCudaSuccess) {
    return DriverFailed(api, r, "cuDriverGetVersion");
  }
  int count = 0;
  if (CuResult r = api.device_get_count(&count); r != kCudaSuccess) {
    return DriverFailed(api, r, "cuDeviceGetCount");
  }
  if (count == 0) return absl::NotFoundError("the CUDA driver sees no GPU");
  std::vector<GpuInfo> gpus;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    int device = 0;
    if (CuResult r = api.device_get(&device, ordinal); r != kCudaSuccess) {
      return DriverFailed(api, r, "cuDeviceGet");
    }
    GpuInfo info;
    info.ordinal = ordinal;
    info.device.driver_version = static_cast<uint32_t>(version);
    if (CuResult r =
            api.device_get_attribute(&info.device.sm_major, kAttrComputeCapabilityMajor, device);
        r != kCudaSuccess) {
      return DriverFailed(api, r, "cuDeviceGetAttribute(compute capability major)");
    }
    if (CuResult r =
            api.device_get_attribute(&info.device.sm_minor, kAttrComputeCapabilityMinor, device);
        r != kCudaSuccess) {
      return DriverFailed(api, r, "cuDeviceGetAttribute(compute capability minor)");
    }
    char name[256] = {};
    if (api.device_get_name(name, sizeof(name) - 1, device) == kCudaSuccess) info.name = name;
    gpus.push_back(std::move(info));
  }
  return gpus;
}

absl::StatusOr<uint32_t> DriverVersion() {
  absl::StatusOr<const DriverApi*> driver = OpenDriver();
  if (!driver.ok()) return driver.status();
  int version = 0;
  if (CuResult r = (*driver)->driver_get_version(&version); r != kCudaSuccess) {
    return DriverFailed(**driver, r, "cuDriverGetVersion");
  }
  return static_cast<uint32_t>(version);
}

absl::StatusOr<std::unique_ptr<LoadedModule>> LoadedModule::Load(const FetchedKernel& kernel,
                                                                 int ordinal) {
  auto start = std::chrono::steady_clock::now();
  if (kernel.kind == ArtifactKind::kLtoir) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel.kernel_name, " is LTO-IR, which the driver cannot load: link it first"));
  }
  absl::StatusOr<const DriverApi*> driver = InitializedDriver();
  if (!driver.ok()) return driver.status();
  const DriverApi& api = **driver;
  std::unique_ptr<LoadedModule> loaded(new LoadedModule());
  // The driver reads a cubin straight from the kernel's bytes (a fast-path view included); PTX
  // must be NUL-terminated, which std::string::c_str() is and a view need not be.
  std::string ptx;
  const char* image = kernel.data().data();
  if (kernel.kind == ArtifactKind::kPtx) {
    ptx = std::string(kernel.data());
    image = ptx.c_str();
  }
  if (api.library_load_data != nullptr) {
    if (CuResult r = api.library_load_data(&loaded->library_, image, nullptr, nullptr, 0, nullptr,
                                           nullptr, 0);
        r != kCudaSuccess) {
      return absl::UnavailableError(absl::StrCat("the CUDA driver refused ", kernel.kernel_name,
                                                 " (", kernel.target, "): ", api.ErrorText(r)));
    }
  } else {
    int device = 0;
    if (CuResult r = api.device_get(&device, ordinal); r != kCudaSuccess) {
      return DriverFailed(api, r, "cuDeviceGet");
    }
    loaded->device_ = device;
    if (absl::Status s = LoadModule(api, image, device, &loaded->context_, &loaded->module_);
        !s.ok()) {
      return s;
    }
  }
  loaded->load_micros_ = MicrosSince(start);
  return loaded;
}

LoadedModule::~LoadedModule() {
  absl::StatusOr<const DriverApi*> driver = OpenDriver();
  if (!driver.ok()) return;
  const DriverApi& api = **driver;
  if (library_ != nullptr) api.library_unload(library_);
  if (module_ != nullptr) {
    api.ctx_push_current(context_);
    api.module_unload(module_);
    void* popped = nullptr;
    api.ctx_pop_current(&popped);
  }
  if (context_ != nullptr) api.primary_ctx_release(device_);
}

absl::StatusOr<void*> LoadedModule::Function(absl::string_view symbol) const {
  absl::StatusOr<const DriverApi*> driver = OpenDriver();
  if (!driver.ok()) return driver.status();
  const DriverApi& api = **driver;
  std::string name(symbol);
  void* function = nullptr;
  CuResult r = library_ != nullptr ? api.library_get_kernel(&function, library_, name.c_str())
                                   : api.module_get_function(&function, module_, name.c_str());
  if (r != kCudaSuccess) {
    return absl::NotFoundError(
        absl::StrCat("the module has no kernel '", name, "' (", api.ErrorText(r), ")"));
  }
  return function;
}

}  // namespace kcache::client
