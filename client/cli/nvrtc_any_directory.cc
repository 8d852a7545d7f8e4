#include "client/cli/nvrtc_any_directory.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/compile/nvrtc_api.h"
#include "engine/objects/object_bundle.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

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

// Whether any output or lowered name of `outcome` holds `text`.
bool Holds(const NvrtcOutcome& outcome, const std::string& text) {
  for (const NvrtcOutput& output : outcome.outputs) {
    if (output.bytes.find(text) != std::string::npos) return true;
  }
  for (const auto& [result, name] : outcome.lowered) {
    if (name.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<objects::NvrtcOutcome> CompileInAnotherDirectory(
    const objects::NvrtcProgram& program, const objects::NvrtcContext& context,
    const objects::NvrtcNameDirectory& name, objects::NvrtcDirectoryState state) {
  if (state.name_exists && !state.directory_exists) {
    return absl::FailedPreconditionError("the name existed in a directory that did not");
  }
  if (chdir(context.cwd.c_str()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot enter the compile's directory ", context.cwd));
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string top =
      absl::StrCat(tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp", "/kcache-nvrtc-XXXXXX");
  if (mkdtemp(top.data()) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cannot make a directory like ", top));
  }
  absl::Cleanup remove = [&] {
    std::error_code ec;
    fs::remove_all(top, ec);
  };
  std::string directory = absl::StrCat(top, "/d");
  objects::NvrtcProgram moved = program;
  moved.name = absl::StrCat(directory, "/", name.base);
  if (state.directory_exists && mkdir(directory.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot make ", directory));
  }
  if (state.name_exists) {
    int fd = open(moved.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot make ", moved.name));
    close(fd);
  }
  void* handle = dlopen(context.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", context.library, ": ", error != nullptr ? error : ""));
  }
  NvrtcApi api;
  absl::Status resolved = ResolveNvrtcApi(handle, context.library, &api);
  if (!resolved.ok()) return resolved;
  return Compile(handle, api, moved);
}

absl::StatusOr<ObjectEntry> AnyDirectoryEntry(const ObjectEntry& entry, absl::string_view bundle,
                                              const objects::NvrtcProgram& program,
                                              const objects::NvrtcContext& context) {
  std::optional<objects::NvrtcNameDirectory> name =
      objects::NvrtcNameDirectoryOf(program.name, context.cwd);
  if (!name) return absl::FailedPreconditionError("the program's name has no directory");
  absl::StatusOr<std::pair<HeaderManifest, objects::NvrtcDirectoryState>> manifest =
      objects::NvrtcAnyDirectoryManifest(entry.manifest, context.cwd, *name);
  if (!manifest.ok()) return manifest.status();
  absl::StatusOr<objects::ObjectBundleView> view = objects::DecodeBundleView(bundle);
  if (!view.ok()) return view.status();
  absl::StatusOr<NvrtcOutcome> outcome =
      objects::DecodeNvrtcOutcome(view->object, program.name_expressions.size());
  if (!outcome.ok()) return outcome.status();
  std::string as_given = program.name.substr(0, program.name.size() - name->base.size());
  if (Holds(*outcome, name->directory) || Holds(*outcome, as_given)) {
    return absl::FailedPreconditionError("NVRTC's output names the program's directory");
  }
  absl::StatusOr<NvrtcOutcome> elsewhere =
      CompileInAnotherDirectory(program, context, *name, manifest->second);
  if (!elsewhere.ok()) return elsewhere.status();
  if (*elsewhere != *outcome) {
    return absl::FailedPreconditionError(
        "compiled in another directory, NVRTC gave another output: the directory reaches it");
  }
  objects::ObjectKey key = objects::NvrtcAnyDirectoryKey(
      objects::ObjectKey{entry.key.command, entry.fields, entry.source}, *name);
  ObjectEntry moved;
  moved.manifest = std::move(manifest->first);
  moved.key = ObjectEntryKey::Of(key.key1, moved.manifest);
  moved.source = key.source;
  moved.fields = key.fields;
  moved.size = entry.size;
  return moved;
}

}  // namespace kcache::cli
