// LinkLtoir and LinkPtx (declared in compiler.h): LTO-IR modules or one PTX module -> one cubin,
// with nvJitLink.
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "engine/compile/compiler.h"
#include "engine/compile/nvrtc_api.h"
#include "engine/compile/toolkit.h"

namespace kcache {
namespace {

// Owns one nvJitLinkHandle; handles are never shared between threads.
class LinkHandle {
 public:
  explicit LinkHandle(const NvJitLinkApi& api) : api_(api) {}
  ~LinkHandle() {
    if (handle_ != nullptr) api_.destroy(&handle_);
  }
  LinkHandle(const LinkHandle&) = delete;
  LinkHandle& operator=(const LinkHandle&) = delete;
  nvJitLinkHandle* out() { return &handle_; }
  nvJitLinkHandle get() const { return handle_; }

 private:
  const NvJitLinkApi& api_;
  nvJitLinkHandle handle_ = nullptr;
};

// nvJitLink's error log followed by its info log; either may be empty.
std::string LinkLog(const NvJitLinkApi& api, nvJitLinkHandle handle) {
  std::string log;
  auto append = [&](auto size_fn, auto get_fn) {
    size_t size = 0;
    if (size_fn(handle, &size) != NVJITLINK_SUCCESS || size == 0) return;
    std::string text(size, '\0');
    if (get_fn(handle, text.data()) != NVJITLINK_SUCCESS) return;
    while (!text.empty() && text.back() == '\0') text.pop_back();
    if (!log.empty() && !text.empty()) log.push_back('\n');
    log += text;
  };
  append(api.get_error_log_size, api.get_error_log);
  append(api.get_info_log_size, api.get_info_log);
  return log;
}

// `what` says which step failed; the payload carries nvJitLink's log unchanged.
absl::Status LinkFailed(absl::string_view input, const Target& target, const std::string& what,
                        nvJitLinkResult result, const std::string& log) {
  absl::Status status = absl::AbortedError(
      absl::StrCat("nvJitLink could not link ", input, " for ", target.ToString(), ": ", what,
                   " (nvJitLink error ", static_cast<int>(result), "):\n", log));
  status.SetPayload(kCompileLogPayload, absl::Cord(log));
  return status;
}

// Links `modules` of one input type into a cubin for `target` with `options` after -arch.
absl::StatusOr<std::string> Link(const Toolkit& toolkit, nvJitLinkInputType type,
                                 absl::string_view input, const std::vector<std::string>& modules,
                                 const Target& target, const std::vector<std::string>& options,
                                 std::string* log) {
  const NvJitLinkApi* api = toolkit.nvjitlink();
  if (api == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the toolkit at ", toolkit.root(), " has no libnvJitLink, so ", input,
                     " cannot be linked; install nvJitLink there"));
  }
  if (target.kind != TargetKind::kSass) {
    return absl::InvalidArgumentError(
        absl::StrCat(input, " links to a cubin for an sm_ target, not ", target.ToString()));
  }
  if (modules.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no ", input, " modules to link"));
  }
  std::vector<std::string> all = {absl::StrCat("-arch=", target.ToString())};
  all.insert(all.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const std::string& o : all) argv.push_back(o.c_str());
  LinkHandle handle(*api);
  if (nvJitLinkResult r =
          api->create(handle.out(), static_cast<uint32_t>(argv.size()), argv.data());
      r != NVJITLINK_SUCCESS) {
    return absl::InternalError(absl::StrCat("nvJitLinkCreate failed for ", target.ToString(),
                                            " (nvJitLink error ", static_cast<int>(r), ")"));
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    std::string name = absl::StrCat("module", i);
    if (nvJitLinkResult r =
            api->add_data(handle.get(), type, modules[i].data(), modules[i].size(), name.c_str());
        r != NVJITLINK_SUCCESS) {
      std::string text = LinkLog(*api, handle.get());
      if (log != nullptr) *log = text;
      return LinkFailed(input, target, absl::StrCat("module ", i, " was refused"), r, text);
    }
  }
  nvJitLinkResult done = api->complete(handle.get());
  std::string text = LinkLog(*api, handle.get());
  if (log != nullptr) *log = text;
  if (done != NVJITLINK_SUCCESS) return LinkFailed(input, target, "the link failed", done, text);

  size_t size = 0;
  if (nvJitLinkResult r = api->get_linked_cubin_size(handle.get(), &size); r != NVJITLINK_SUCCESS) {
    return absl::InternalError(absl::StrCat("nvJitLink could not report the cubin size (error ",
                                            static_cast<int>(r), ")"));
  }
  std::string cubin(size, '\0');
  if (nvJitLinkResult r = api->get_linked_cubin(handle.get(), cubin.data());
      r != NVJITLINK_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("nvJitLink could not return the cubin (error ", static_cast<int>(r), ")"));
  }
  return cubin;
}

}  // namespace

absl::StatusOr<std::string> LinkLtoir(const Toolkit& toolkit,
                                      const std::vector<std::string>& ltoir_modules,
                                      const Target& target, std::string* log) {
  return Link(toolkit, NVJITLINK_INPUT_LTOIR, "LTO-IR", ltoir_modules, target, {"-lto"}, log);
}

absl::StatusOr<std::string> LinkPtx(const Toolkit& toolkit, const std::string& ptx,
                                    const Target& target, const std::vector<std::string>& options,
                                    std::string* log) {
  return Link(toolkit, NVJITLINK_INPUT_PTX, "PTX", {ptx}, target, options, log);
}

}  // namespace kcache
