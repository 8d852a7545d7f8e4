#include "engine/compile/nvrtc_api.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

// Resolves `name` into `*fn`, or records the first failure in `status`.
template <typename Fn>
void Resolve(void* handle, const char* name, const std::string& library_path, Fn* fn,
             absl::Status* status) {
  if (!status->ok()) return;
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    *status = absl::FailedPreconditionError(
        absl::StrCat(library_path, " has no ", name,
                     "; this CUDA toolkit is too old or damaged: install CUDA 13.0 or newer"));
    return;
  }
  *fn = reinterpret_cast<Fn>(symbol);
}

}  // namespace

std::string NvrtcApi::ErrorString(nvrtcResult result) const {
  const char* text = get_error_string != nullptr ? get_error_string(result) : nullptr;
  return absl::StrCat(text != nullptr ? text : "NVRTC error", " (", static_cast<int>(result), ")");
}

absl::Status ResolveNvrtcApi(void* handle, const std::string& path, NvrtcApi* api) {
  absl::Status s;
  Resolve(handle, "nvrtcGetErrorString", path, &api->get_error_string, &s);
  Resolve(handle, "nvrtcVersion", path, &api->version, &s);
  Resolve(handle, "nvrtcGetNumSupportedArchs", path, &api->get_num_supported_archs, &s);
  Resolve(handle, "nvrtcGetSupportedArchs", path, &api->get_supported_archs, &s);
  Resolve(handle, "nvrtcCreateProgram", path, &api->create_program, &s);
  Resolve(handle, "nvrtcDestroyProgram", path, &api->destroy_program, &s);
  Resolve(handle, "nvrtcAddNameExpression", path, &api->add_name_expression, &s);
  Resolve(handle, "nvrtcCompileProgram", path, &api->compile_program, &s);
  Resolve(handle, "nvrtcGetProgramLogSize", path, &api->get_program_log_size, &s);
  Resolve(handle, "nvrtcGetProgramLog", path, &api->get_program_log, &s);
  Resolve(handle, "nvrtcGetCUBINSize", path, &api->get_cubin_size, &s);
  Resolve(handle, "nvrtcGetCUBIN", path, &api->get_cubin, &s);
  Resolve(handle, "nvrtcGetPTXSize", path, &api->get_ptx_size, &s);
  Resolve(handle, "nvrtcGetPTX", path, &api->get_ptx, &s);
  Resolve(handle, "nvrtcGetLTOIRSize", path, &api->get_ltoir_size, &s);
  Resolve(handle, "nvrtcGetLTOIR", path, &api->get_ltoir, &s);
  Resolve(handle, "nvrtcGetLoweredName", path, &api->get_lowered_name, &s);
  return s;
}

absl::Status ResolveNvJitLinkApi(void* handle, const std::string& path, NvJitLinkApi* api) {
  absl::Status s;
  Resolve(handle, "nvJitLinkVersion", path, &api->version, &s);
  Resolve(handle, "__nvJitLinkCreate_13_0", path, &api->create, &s);
  Resolve(handle, "__nvJitLinkDestroy_13_0", path, &api->destroy, &s);
  Resolve(handle, "__nvJitLinkAddData_13_0", path, &api->add_data, &s);
  Resolve(handle, "__nvJitLinkComplete_13_0", path, &api->complete, &s);
  Resolve(handle, "__nvJitLinkGetLinkedCubinSize_13_0", path, &api->get_linked_cubin_size, &s);
  Resolve(handle, "__nvJitLinkGetLinkedCubin_13_0", path, &api->get_linked_cubin, &s);
  Resolve(handle, "__nvJitLinkGetErrorLogSize_13_0", path, &api->get_error_log_size, &s);
  Resolve(handle, "__nvJitLinkGetErrorLog_13_0", path, &api->get_error_log, &s);
  Resolve(handle, "__nvJitLinkGetInfoLogSize_13_0", path, &api->get_info_log_size, &s);
  Resolve(handle, "__nvJitLinkGetInfoLog_13_0", path, &api->get_info_log, &s);
  return s;
}

}  // namespace kcache
