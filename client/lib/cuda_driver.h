// The few CUDA driver entry points libkcache uses, found with dlopen/dlsym at run time.
// Types are declared here (plain C types), so neither cuda.h nor libcuda is needed to build.
#ifndef KCACHE_CLIENT_LIB_CUDA_DRIVER_H_
#define KCACHE_CLIENT_LIB_CUDA_DRIVER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kcache::client {

using CuResult = int;  // CUresult
inline constexpr CuResult kCudaSuccess = 0;
inline constexpr CuResult kCudaErrorStubLibrary = 34;
inline constexpr CuResult kCudaErrorNoDevice = 100;
inline constexpr CuResult kCudaErrorInvalidDevice = 101;
inline constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_...
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr int kJitErrorLogBuffer = 5;           // CU_JIT_ERROR_LOG_BUFFER
inline constexpr int kJitErrorLogBufferSizeBytes = 6;  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES

struct DriverApi {
  CuResult (*init)(unsigned int flags) = nullptr;
  CuResult (*driver_get_version)(int* version) = nullptr;
  CuResult (*device_get_count)(int* count) = nullptr;
  CuResult (*device_get)(int* device, int ordinal) = nullptr;
  CuResult (*device_get_attribute)(int* value, int attribute, int device) = nullptr;
  CuResult (*device_get_name)(char* name, int length, int device) = nullptr;
  CuResult (*get_error_string)(CuResult error, const char** text) = nullptr;
  CuResult (*primary_ctx_retain)(void** context, int device) = nullptr;
  CuResult (*primary_ctx_release)(int device) = nullptr;
  CuResult (*ctx_push_current)(void* context) = nullptr;
  CuResult (*ctx_pop_current)(void** context) = nullptr;
  CuResult (*module_load_data_ex)(void** module, const void* image, unsigned int num_options,
                                  int* options, void** values) = nullptr;
  CuResult (*module_get_function)(void** function, void* module, const char* name) = nullptr;
  CuResult (*module_unload)(void* module) = nullptr;
  // CUDA 12.0+ drivers only (null otherwise): context-independent loading.
  CuResult (*library_load_data)(void** library, const void* code, int* jit_options,
                                void** jit_values, unsigned int num_jit_options,
                                int* library_options, void** library_values,
                                unsigned int num_library_options) = nullptr;
  CuResult (*library_get_kernel)(void** kernel, void* library, const char* name) = nullptr;
  CuResult (*library_unload)(void* library) = nullptr;
  // Optional (null when the driver lacks them): the kernel's function in the current context
  // (cuKernelGetFunction, 12.0+), and a device's UUID (cuDeviceGetUuid_v2, else cuDeviceGetUuid).
  CuResult (*kernel_get_function)(void** function, void* kernel) = nullptr;
  CuResult (*device_get_uuid)(unsigned char uuid[16], int device) = nullptr;

  // "CUDA_ERROR_INVALID_IMAGE (200: device kernel image is invalid)".
  std::string ErrorText(CuResult result) const;
};

// The driver, opened once per process ($KCACHE_LIBCUDA if set, else libcuda.so.1). NotFound
// ("no CUDA driver: ...") when it cannot be opened or lacks an entry point.
absl::StatusOr<const DriverApi*> OpenDriver();

// As OpenDriver, and cuInit(0) has succeeded (done once). NotFound when the driver is the
// toolkit's stub or sees no GPU; Unavailable for another cuInit failure.
absl::StatusOr<const DriverApi*> InitializedDriver();

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_CUDA_DRIVER_H_
