// Function pointers into libnvrtc and libnvJitLink, resolved with dlsym from libraries that
// Toolkit::Load dlopen'd. The CUDA headers are included for their types only: nothing here
// (or anywhere in kcache) links a CUDA library, and every pointer type is taken with decltype
// from the header's own declaration, so a signature cannot drift from the real one.
//
// Thread safety (NVRTC User Guide, "Thread Safety"): NVRTC API functions may be called from
// several threads at once as long as no two threads use the same nvrtcProgram while one of
// them is in nvrtcCompileProgram or nvrtcAddNameExpression. kcache creates one program per
// compile and never shares it, so concurrent compiles are safe. nvJitLink likewise keeps all
// state in its handle; kcache creates one handle per link.
#ifndef KCACHE_ENGINE_COMPILE_NVRTC_API_H_
#define KCACHE_ENGINE_COMPILE_NVRTC_API_H_

// The nvJitLink header wraps versioned entry points (__nvJitLinkCreate_13_0, ...) in static
// inline functions; keep only the declarations, we resolve the entry points ourselves.
#ifndef NVJITLINK_NO_INLINE
#define NVJITLINK_NO_INLINE
#endif
#include <nvJitLink.h>
#include <nvrtc.h>

#include <string>

#include "absl/status/status.h"

namespace kcache {

struct NvrtcApi {
  decltype(&::nvrtcGetErrorString) get_error_string = nullptr;
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) get_num_supported_archs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) get_supported_archs = nullptr;
  decltype(&::nvrtcCreateProgram) create_program = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&::nvrtcAddNameExpression) add_name_expression = nullptr;
  decltype(&::nvrtcCompileProgram) compile_program = nullptr;
  decltype(&::nvrtcGetProgramLogSize) get_program_log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) get_program_log = nullptr;
  decltype(&::nvrtcGetCUBINSize) get_cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) get_cubin = nullptr;
  decltype(&::nvrtcGetPTXSize) get_ptx_size = nullptr;
  decltype(&::nvrtcGetPTX) get_ptx = nullptr;
  decltype(&::nvrtcGetLTOIRSize) get_ltoir_size = nullptr;
  decltype(&::nvrtcGetLTOIR) get_ltoir = nullptr;
  decltype(&::nvrtcGetLoweredName) get_lowered_name = nullptr;

  // "NVRTC_ERROR_COMPILATION (6)"; safe to call with any result.
  std::string ErrorString(nvrtcResult result) const;
};

struct NvJitLinkApi {
  decltype(&::nvJitLinkVersion) version = nullptr;
  decltype(&::__nvJitLinkCreate_13_0) create = nullptr;
  decltype(&::__nvJitLinkDestroy_13_0) destroy = nullptr;
  decltype(&::__nvJitLinkAddData_13_0) add_data = nullptr;
  decltype(&::__nvJitLinkComplete_13_0) complete = nullptr;
  decltype(&::__nvJitLinkGetLinkedCubinSize_13_0) get_linked_cubin_size = nullptr;
  decltype(&::__nvJitLinkGetLinkedCubin_13_0) get_linked_cubin = nullptr;
  decltype(&::__nvJitLinkGetErrorLogSize_13_0) get_error_log_size = nullptr;
  decltype(&::__nvJitLinkGetErrorLog_13_0) get_error_log = nullptr;
  decltype(&::__nvJitLinkGetInfoLogSize_13_0) get_info_log_size = nullptr;
  decltype(&::__nvJitLinkGetInfoLog_13_0) get_info_log = nullptr;
};

// Fills `api` from `handle` (a dlopen handle). FailedPrecondition naming the first missing
// symbol and `library_path` when the library lacks one (e.g. an NVRTC older than 12.4 has no
// nvrtcGetLTOIR).
absl::Status ResolveNvrtcApi(void* handle, const std::string& library_path, NvrtcApi* api);

// The same for nvJitLink. Entry points are looked up under the versioned names the CUDA 13.0
// header binds to (__nvJitLinkCreate_13_0, ...), never under the plain names, whose ABI may
// belong to another release.
absl::Status ResolveNvJitLinkApi(void* handle, const std::string& library_path, NvJitLinkApi* api);

}  // namespace kcache

#endif  // KCACHE_ENGINE_COMPILE_NVRTC_API_H_
