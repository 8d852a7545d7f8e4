#include "client/lib/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/environment.h"

namespace kcache::client {
namespace {

constexpr char kNoDriverHint[] =
    "on a GPU machine install the NVIDIA driver (or set KCACHE_LIBCUDA to libcuda's path); "
    "without a GPU, give the device's SM explicitly";

template <typename Fn>
bool Find(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return *fn != nullptr;
}

struct Opened {
  DriverApi api;
  absl::Status status;
};

Opened Open() {
  Opened out;
  std::string path = EnvValue("KCACHE_LIBCUDA");
  if (path.empty()) path = "libcuda.so.1";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    out.status =
        absl::NotFoundError(absl::StrCat("no CUDA driver: ", path, " could not be loaded (",
                                         error ? error : "unknown error", "); ", kNoDriverHint));
    return out;
  }
  DriverApi& a = out.api;
  const char* missing = nullptr;
  auto need = [&](const char* name, auto* fn) {
    if (!Find(handle, name, fn) && missing == nullptr) missing = name;
  };
  need("cuInit", &a.init);
  need("cuDriverGetVersion", &a.driver_get_version);
  need("cuDeviceGetCount", &a.device_get_count);
  need("cuDeviceGet", &a.device_get);
  need("cuDeviceGetAttribute", &a.device_get_attribute);
  need("cuDeviceGetName", &a.device_get_name);
  need("cuGetErrorString", &a.get_error_string);
  need("cuDevicePrimaryCtxRetain", &a.primary_ctx_retain);
  if (!Find(handle, "cuDevicePrimaryCtxRelease_v2", &a.primary_ctx_release)) {
    need("cuDevicePrimaryCtxRelease", &a.primary_ctx_release);
  }
  need("cuCtxPushCurrent_v2", &a.ctx_push_current);
  need("cuCtxPopCurrent_v2", &a.ctx_pop_current);
  need("cuModuleLoadDataEx", &a.module_load_data_ex);
  need("cuModuleGetFunction", &a.module_get_function);
  need("cuModuleUnload", &a.module_unload);
  if (missing != nullptr) {
    out.status = absl::NotFoundError(
        absl::StrCat("no usable CUDA driver: ", path, " has no ", missing, "; ", kNoDriverHint));
    return out;
  }
  // Optional (CUDA 12.0+): all three or none.
  if (!Find(handle, "cuLibraryLoadData", &a.library_load_data) ||
      !Find(handle, "cuLibraryGetKernel", &a.library_get_kernel) ||
      !Find(handle, "cuLibraryUnload", &a.library_unload)) {
    a.library_load_data = nullptr;
    a.library_get_kernel = nullptr;
    a.library_unload = nullptr;
  }
  Find(handle, "cuKernelGetFunction", &a.kernel_get_function);
  if (!Find(handle, "cuDeviceGetUuid_v2", &a.device_get_uuid)) {
    Find(handle, "cuDeviceGetUuid", &a.device_get_uuid);
  }
  return out;  // the handle stays open for the life of the process
}

const Opened& Driver() {
  static const Opened* opened = new Opened(Open());
  return *opened;
}

}  // namespace

std::string DriverApi::ErrorText(CuResult result) const {
  const char* text = nullptr;
  if (get_error_string == nullptr || get_error_string(result, &text) != kCudaSuccess ||
      text == nullptr) {
    return absl::StrCat("CUDA error ", result);
  }
  return absl::StrCat("CUDA error ", result, ": ", text);
}

absl::StatusOr<const DriverApi*> OpenDriver() {
  const Opened& d = Driver();
  if (!d.status.ok()) return d.status;
  return &d.api;
}

absl::StatusOr<const DriverApi*> InitializedDriver() {
  static const absl::Status* init_status = [] {
    absl::StatusOr<const DriverApi*> api = OpenDriver();
    if (!api.ok()) return new absl::Status(api.status());
    CuResult r = (*api)->init(0);
    if (r == kCudaSuccess) return new absl::Status();
    if (r == kCudaErrorStubLibrary) {
      return new absl::Status(absl::NotFoundError(
          absl::StrCat("no CUDA driver: the libcuda loaded is the CUDA toolkit's stub library (",
                       (*api)->ErrorText(r), "); ", kNoDriverHint)));
    }
    if (r == kCudaErrorNoDevice) {
      return new absl::Status(absl::NotFoundError(
          absl::StrCat("the CUDA driver sees no GPU (", (*api)->ErrorText(r), ")")));
    }
    return new absl::Status(absl::UnavailableError(
        absl::StrCat("the CUDA driver failed to initialize: ", (*api)->ErrorText(r))));
  }();
  if (!init_status->ok()) return *init_status;
  return OpenDriver();
}

}  // namespace kcache::client
