// DetectDevices and LoadedModule over the dlopen'd driver (cuda_driver.h).
#include "kcache/device.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/lib/cuda_driver.h"
#include "client/lib/visible_devices.h"
#include "core/environment.h"

namespace kcache::client {
namespace {

constexpr char kSeesNoGpu[] = "the CUDA driver sees no GPU";

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

// "GPU-8f2c1a9e-..." from the driver's 16 bytes, or "" when it does not say.
std::string UuidOf(const DriverApi& api, int device) {
  unsigned char b[16] = {};
  if (api.device_get_uuid == nullptr || api.device_get_uuid(b, device) != kCudaSuccess) return "";
  return absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

// The GPU at `ordinal`: InvalidArgument for an ordinal the process does not see.
absl::StatusOr<GpuInfo> QueryGpu(const DriverApi& api, int ordinal, uint32_t driver_version) {
  int device = 0;
  if (CuResult r = api.device_get(&device, ordinal); r != kCudaSuccess) {
    if (r == kCudaErrorInvalidDevice) {
      int count = 0;
      api.device_get_count(&count);
      return absl::InvalidArgumentError(
          absl::StrCat("there is no GPU ", ordinal, ": this process sees ", count,
                       " GPU(s), ordinals 0..", count - 1, " (CUDA_VISIBLE_DEVICES applies)"));
    }
    return DriverFailed(api, r, "cuDeviceGet");
  }
  GpuInfo info;
  info.ordinal = ordinal;
  info.device.driver_version = driver_version;
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
  info.uuid = UuidOf(api, device);
  return info;
}

absl::StatusOr<uint32_t> VersionOf(const DriverApi& api) {
  int version = 0;
  if (CuResult r = api.driver_get_version(&version); r != kCudaSuccess) {
    return DriverFailed(api, r, "cuDriverGetVersion");
  }
  return static_cast<uint32_t>(version);
}

// The loaded image LookUpEntries looks into: a library, or a module.
struct Image {
  void* library = nullptr;
  void* module = nullptr;
};

// Looks up every entry point of `image`; the error names the first that fails. A library is
// loaded into a context only when a function of it is asked for there: this asks in the GPU's
// primary context, retained into *context (the caller releases it with the module), so an image
// the GPU cannot run fails now (CUDA_ERROR_NO_BINARY_FOR_GPU), not at the first launch.
absl::Status LookUpEntries(const DriverApi& api, Image image, int device, void** context,
                           const FetchedKernel& kernel, const GpuInfo& gpu,
                           const std::vector<std::string>& entries) {
  bool in_context = image.library != nullptr && api.kernel_get_function != nullptr;
  if (in_context) {
    if (CuResult r = api.primary_ctx_retain(context, device); r != kCudaSuccess) {
      *context = nullptr;
      return DriverFailed(api, r, "cuDevicePrimaryCtxRetain");
    }
    if (CuResult r = api.ctx_push_current(*context); r != kCudaSuccess) {
      return DriverFailed(api, r, "cuCtxPushCurrent");
    }
  }
  absl::Status status;
  for (const std::string& entry : entries) {
    void* handle = nullptr;
    CuResult r = image.library != nullptr
                     ? api.library_get_kernel(&handle, image.library, entry.c_str())
                     : api.module_get_function(&handle, image.module, entry.c_str());
    void* function = nullptr;
    if (r == kCudaSuccess && in_context) r = api.kernel_get_function(&function, handle);
    if (r != kCudaSuccess) {
      status = absl::UnavailableError(absl::StrCat(
          kernel.kernel_name, " (", kernel.target, "): entry point '", entry,
          "' does not load on GPU ", gpu.ordinal, " (", gpu.name, ", sm_", gpu.device.arch(),
          "): ", api.ErrorText(r), "; resolve it for ", gpu.device.ToString()));
      break;
    }
  }
  if (in_context) {
    void* popped = nullptr;
    api.ctx_pop_current(&popped);
  }
  return status;
}

}  // namespace

absl::StatusOr<std::vector<GpuInfo>> DetectDevices() {
  std::optional<std::string> listed = EnvIfSet("CUDA_VISIBLE_DEVICES");
  VisibleDevices visible = ParseVisibleDevices(listed.has_value() ? listed->c_str() : nullptr);
  absl::StatusOr<const DriverApi*> driver = InitializedDriver();
  if (!driver.ok()) {
    std::string why = WhyNoGpu(visible);
    if (why.empty() || !absl::StartsWith(driver.status().message(), kSeesNoGpu)) {
      return driver.status();
    }
    return absl::NotFoundError(absl::StrCat(driver.status().message(), ": ", why));
  }
  const DriverApi& api = **driver;
  absl::StatusOr<uint32_t> version = VersionOf(api);
  if (!version.ok()) return version.status();
  int count = 0;
  if (CuResult r = api.device_get_count(&count); r != kCudaSuccess) {
    return DriverFailed(api, r, "cuDeviceGetCount");
  }
  if (count == 0) {
    std::string why = WhyNoGpu(visible);
    return absl::NotFoundError(absl::StrCat(kSeesNoGpu, why.empty() ? "" : ": ", why));
  }
  std::vector<GpuInfo> gpus;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    absl::StatusOr<GpuInfo> gpu = QueryGpu(api, ordinal, *version);
    if (!gpu.ok()) return gpu.status();
    gpus.push_back(*std::move(gpu));
  }
  LabelVisibleGpus(visible, &gpus);
  return gpus;
}

absl::StatusOr<uint32_t> DriverVersion() {
  absl::StatusOr<const DriverApi*> driver = OpenDriver();
  if (!driver.ok()) return driver.status();
  return VersionOf(**driver);
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
  absl::StatusOr<uint32_t> version = VersionOf(api);
  if (!version.ok()) return version.status();
  absl::StatusOr<GpuInfo> gpu = QueryGpu(api, ordinal, *version);
  if (!gpu.ok()) return gpu.status();
  if (absl::Status s = CheckRunsOn(kernel, *gpu); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> entries = EntryPoints(kernel);
  if (!entries.ok()) return entries.status();
  std::unique_ptr<LoadedModule> loaded(new LoadedModule());
  // The driver reads a cubin straight from the kernel's bytes (a fast-path view included); PTX
  // must be NUL-terminated, which std::string::c_str() is and a view need not be.
  std::string ptx;
  const char* image = kernel.data().data();
  if (kernel.kind == ArtifactKind::kPtx) {
    ptx = std::string(kernel.data());
    image = ptx.c_str();
  }
  int device = 0;
  if (CuResult r = api.device_get(&device, ordinal); r != kCudaSuccess) {
    return DriverFailed(api, r, "cuDeviceGet");
  }
  loaded->device_ = device;
  if (api.library_load_data != nullptr) {
    if (CuResult r = api.library_load_data(&loaded->library_, image, nullptr, nullptr, 0, nullptr,
                                           nullptr, 0);
        r != kCudaSuccess) {
      return absl::UnavailableError(absl::StrCat("the CUDA driver refused ", kernel.kernel_name,
                                                 " (", kernel.target, "): ", api.ErrorText(r)));
    }
  } else if (absl::Status s = LoadModule(api, image, device, &loaded->context_, &loaded->module_);
             !s.ok()) {
    return s;
  }
  if (absl::Status s = LookUpEntries(api, Image{loaded->library_, loaded->module_}, device,
                                     &loaded->context_, kernel, *gpu, *entries);
      !s.ok()) {
    return s;
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
