#include "client/cli/nvrtc_recompile.h"

#include <dlfcn.h>

#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/compile/nvrtc_api.h"

namespace kcache::cli {
namespace {

using objects::NvrtcOutcome;
using objects::NvrtcOutput;

constexpr int kInternalError = NVRTC_ERROR_INTERNAL_ERROR;

using SizeGetter = nvrtcResult (*)(nvrtcProgram, size_t*);
using ContentGetter = nvrtcResult (*)(nvrtcProgram, char*);

// One output as the stand-in keeps it (objects::KeptNvrtcOutput): a getter the library lacks
// answers NVRTC_ERROR_INTERNAL_ERROR.
NvrtcOutput Output(nvrtcProgram program, SizeGetter size_getter, ContentGetter content_getter) {
  size_t size = 0;
  int size_result = size_getter != nullptr ? size_getter(program, &size) : kInternalError;
  if (size_result != NVRTC_SUCCESS) size = 0;
  std::vector<char> bytes(size > 0 ? size : 1);
  int result = content_getter != nullptr ? content_getter(program, bytes.data()) : kInternalError;
  return objects::KeptNvrtcOutput(size_result, size, result, bytes.data());
}

// The getter `name` of the library at `handle`, or null.
template <typename Fn>
Fn Getter(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// What `program` gives compiled by the library at `handle` (its API: `api`).
absl::StatusOr<NvrtcOutcome> Compile(void* handle, const NvrtcApi& api,
                                     const objects::NvrtcProgram& program) {
  std::vector<const char*> headers, include_names, options;
  for (const auto& [name, content] : program.headers) {
    include_names.push_back(name.c_str());
    headers.push_back(content.c_str());
  }
  for (const std::string& option : program.options) options.push_back(option.c_str());
  nvrtcProgram made = nullptr;
  nvrtcResult created = api.create_program(
      &made, program.source.c_str(), program.name.empty() ? nullptr : program.name.c_str(),
      static_cast<int>(headers.size()), headers.data(), include_names.data());
  if (created != NVRTC_SUCCESS) {
    return absl::FailedPreconditionError(
        absl::StrCat("nvrtcCreateProgram: ", api.ErrorString(created)));
  }
  absl::Cleanup destroy = [&] { api.destroy_program(&made); };
  for (const std::string& expression : program.name_expressions) {
    nvrtcResult added = api.add_name_expression(made, expression.c_str());
    if (added != NVRTC_SUCCESS) {
      return absl::FailedPreconditionError(
          absl::StrCat("nvrtcAddNameExpression: ", api.ErrorString(added)));
    }
  }
  NvrtcOutcome outcome;
  outcome.result = api.compile_program(made, static_cast<int>(options.size()), options.data());
  // In the stand-in's order (client/nvrtc/nvrtc_cache_abi.h KCACHE_NVRTC_*).
  outcome.outputs = {
      Output(made, api.get_ptx_size, api.get_ptx),
      Output(made, api.get_cubin_size, api.get_cubin),
      Output(made, api.get_ltoir_size, api.get_ltoir),
      Output(made, Getter<SizeGetter>(handle, "nvrtcGetOptiXIRSize"),
             Getter<ContentGetter>(handle, "nvrtcGetOptiXIR")),
      Output(made, Getter<SizeGetter>(handle, "nvrtcGetTileIRSize"),
             Getter<ContentGetter>(handle, "nvrtcGetTileIR")),
      Output(made, api.get_program_log_size, api.get_program_log),
  };
  for (const std::string& expression : program.name_expressions) {
    const char* lowered = nullptr;
    int result = api.get_lowered_name(made, expression.c_str(), &lowered);
    outcome.lowered.emplace_back(result,
                                 result == NVRTC_SUCCESS && lowered != nullptr ? lowered : "");
  }
  return outcome;
}

}  // namespace

absl::StatusOr<NvrtcOutcome> RecompileNvrtc(const objects::NvrtcProgram& program,
                                            const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", library, ": ", error != nullptr ? error : ""));
  }
  NvrtcApi api;
  absl::Status resolved = ResolveNvrtcApi(handle, library, &api);
  if (!resolved.ok()) return resolved;
  return Compile(handle, api, program);
}

}  // namespace kcache::cli
