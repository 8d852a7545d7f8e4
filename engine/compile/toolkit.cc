#include "engine/compile/toolkit.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/environment.h"
#include "core/library_build.h"
#include "core/sha256.h"
#include "engine/compile/nvrtc_api.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;

constexpr char kNvrtcBase[] = "libnvrtc.so";
constexpr char kNvJitLinkBase[] = "libnvJitLink.so";
constexpr char kPreferredSoVersion[] = "13";

std::string CudaHomeForMessage() {
  std::optional<std::string> env = EnvIfSet("CUDA_HOME");
  return env.has_value() ? absl::StrCat("CUDA_HOME=", *env) : "CUDA_HOME is unset";
}

absl::Status NoToolkit(const std::string& root, const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat("no CUDA toolkit at ", root, ": ", why, " (", CudaHomeForMessage(),
                   "); install the CUDA toolkit there or set CUDA_HOME / --toolkit"));
}

bool IsDirectory(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows symlinks
}

// <root>/lib64, <root>/lib, <root>/targets/*/lib: the layouts of the runfile/deb installs
// and of the pip wheels (which use lib/).
std::vector<fs::path> LibraryDirs(const fs::path& root) {
  std::vector<fs::path> dirs = {root / "lib64", root / "lib"};
  std::error_code ec;
  std::vector<fs::path> targets;
  for (const auto& entry : fs::directory_iterator(root / "targets", ec)) {
    targets.push_back(entry.path() / "lib");
  }
  std::sort(targets.begin(), targets.end());
  dirs.insert(dirs.end(), targets.begin(), targets.end());
  std::vector<fs::path> existing;
  for (const auto& dir : dirs) {
    if (IsDirectory(dir)) existing.push_back(dir);
  }
  return existing;
}

// <dir>/<base>.13, then <dir>/<base>, then the highest <dir>/<base>.<N>, in the first dir that
// has any of them.
std::string FindLibrary(const std::vector<fs::path>& dirs, const std::string& base) {
  for (const auto& dir : dirs) {
    fs::path preferred = dir / absl::StrCat(base, ".", kPreferredSoVersion);
    if (IsFile(preferred)) return preferred.string();
    if (IsFile(dir / base)) return (dir / base).string();
    int best = -1;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::string name = entry.path().filename().string();
      int so_major = 0;
      if (name.rfind(base + ".", 0) == 0 &&
          absl::SimpleAtoi(name.substr(base.size() + 1), &so_major) && so_major > best) {
        best = so_major;
      }
    }
    if (best >= 0) return (dir / absl::StrCat(base, ".", best)).string();
  }
  return "";
}

absl::StatusOr<void*> OpenLibrary(const std::string& root, const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_LOCAL | RTLD_NOW);
  if (handle == nullptr) {
    const char* err = dlerror();
    return NoToolkit(root, absl::StrCat("cannot load ", path, ": ", err ? err : "dlopen failed"));
  }
  return handle;
}

class ToolkitImpl final : public Toolkit {
 public:
  const std::string& root() const override { return identity_.root; }
  const ToolkitIdentity& identity() const override { return identity_; }
  const std::vector<int>& supported_archs() const override { return archs_; }
  const std::vector<std::string>& include_options() const override { return includes_; }
  const NvrtcApi& nvrtc() const override { return nvrtc_; }
  const NvJitLinkApi* nvjitlink() const override { return has_nvjitlink_ ? &nvjitlink_ : nullptr; }
  int64_t load_micros() const override { return load_micros_; }

  // The libraries stay loaded for the life of the process: NVRTC registers process-wide
  // state (atexit handlers, its builtins library), so it is never dlclose'd.
  absl::Status LoadNvrtc(const std::string& root, const std::vector<fs::path>& dirs);
  absl::Status LoadBuiltinsAndIdentity(const std::string& root, const std::string& path);
  absl::Status LoadNvJitLink(const std::vector<fs::path>& dirs);
  void AddIncludes(const fs::path& root);
  void set_load_micros(int64_t micros) { load_micros_ = micros; }

 private:
  ToolkitIdentity identity_;
  std::vector<int> archs_;
  std::vector<std::string> includes_;
  NvrtcApi nvrtc_;
  NvJitLinkApi nvjitlink_;
  bool has_nvjitlink_ = false;
  int64_t load_micros_ = 0;
};

absl::Status ToolkitImpl::LoadNvrtc(const std::string& root, const std::vector<fs::path>& dirs) {
  identity_.root = root;
  std::string path = FindLibrary(dirs, kNvrtcBase);
  if (path.empty()) {
    std::vector<std::string> tried;
    for (const auto& d : dirs) tried.push_back(d.string());
    std::string where = tried.empty() ? root + "/lib64" : absl::StrJoin(tried, ", ");
    return NoToolkit(root, absl::StrCat(kNvrtcBase, " not found in ", where));
  }
  absl::StatusOr<void*> handle = OpenLibrary(root, path);
  if (!handle.ok()) return handle.status();
  if (absl::Status s = ResolveNvrtcApi(*handle, path, &nvrtc_); !s.ok()) return s;

  if (nvrtcResult r = nvrtc_.version(&identity_.major, &identity_.minor); r != NVRTC_SUCCESS) {
    return NoToolkit(root, absl::StrCat("nvrtcVersion failed: ", nvrtc_.ErrorString(r)));
  }
  int num_archs = 0;
  if (nvrtcResult r = nvrtc_.get_num_supported_archs(&num_archs);
      r != NVRTC_SUCCESS || num_archs <= 0) {
    return NoToolkit(root,
                     absl::StrCat("nvrtcGetNumSupportedArchs failed: ", nvrtc_.ErrorString(r)));
  }
  archs_.resize(num_archs);
  if (nvrtcResult r = nvrtc_.get_supported_archs(archs_.data()); r != NVRTC_SUCCESS) {
    return NoToolkit(root, absl::StrCat("nvrtcGetSupportedArchs failed: ", nvrtc_.ErrorString(r)));
  }
  std::sort(archs_.begin(), archs_.end());
  return LoadBuiltinsAndIdentity(root, path);
}

absl::Status ToolkitImpl::LoadBuiltinsAndIdentity(const std::string& root,
                                                  const std::string& path) {
  // NVRTC dlopens its builtins by soname at the first compile, which finds whatever the
  // dynamic linker's search path holds (here /usr/local/cuda-13.0/lib via ld.so.cache, not
  // the toolkit being loaded). Loading the one next to libnvrtc first, by full path, makes
  // that lookup find it (glibc matches loaded sonames), so the builtins hashed into the
  // identity are the ones that compile.
  fs::path builtins = fs::path(path).parent_path() /
                      absl::StrCat("libnvrtc-builtins.so.", identity_.major, ".", identity_.minor);
  if (!IsFile(builtins)) {
    return NoToolkit(root, absl::StrCat(builtins.string(), " is missing (libnvrtc at ", path,
                                        " cannot compile without it)"));
  }
  absl::StatusOr<void*> builtins_handle = OpenLibrary(root, builtins.string());
  if (!builtins_handle.ok()) return builtins_handle.status();

  absl::StatusOr<std::string> nvrtc_build = LibraryBuild(path);
  if (!nvrtc_build.ok()) return NoToolkit(root, std::string(nvrtc_build.status().message()));
  absl::StatusOr<std::string> builtins_build = LibraryBuild(builtins.string());
  if (!builtins_build.ok()) {
    return NoToolkit(root, std::string(builtins_build.status().message()));
  }
  identity_.build = absl::StrCat("nvrtc ", identity_.major, ".", identity_.minor, " ", *nvrtc_build,
                                 "; builtins ", *builtins_build);
  identity_.id = absl::StrCat("nvrtc-", identity_.major, ".", identity_.minor, "+",
                              Sha256Hex(identity_.build).substr(0, 12));
  return absl::OkStatus();
}

absl::Status ToolkitImpl::LoadNvJitLink(const std::vector<fs::path>& dirs) {
  std::string path = FindLibrary(dirs, kNvJitLinkBase);
  if (path.empty()) return absl::OkStatus();  // optional: LTO-IR linking is unavailable
  void* handle = dlopen(path.c_str(), RTLD_LOCAL | RTLD_NOW);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", path, ": ", err ? err : "dlopen failed",
                     "; repair the toolkit or remove libnvJitLink to run without LTO-IR linking"));
  }
  if (absl::Status s = ResolveNvJitLinkApi(handle, path, &nvjitlink_); !s.ok()) return s;
  has_nvjitlink_ = true;
  return absl::OkStatus();
}

void ToolkitImpl::AddIncludes(const fs::path& root) {
  std::vector<fs::path> dirs = {root / "include", root / "include" / "cccl"};
  // NVIDIA's pip wheels split a toolkit into packages side by side under .../nvidia/: NVRTC
  // in cuda_nvrtc/ (the root given), cuda_fp16.h & co. in cuda_runtime/include, CCCL (cub,
  // cuda/std) in cuda_cccl/include. A wheel root takes its siblings' headers.
  if (root.filename() == "cuda_nvrtc") {
    dirs.push_back(root.parent_path() / "cuda_runtime" / "include");
    dirs.push_back(root.parent_path() / "cuda_cccl" / "include");
  }
  for (const fs::path& dir : dirs) {
    if (IsDirectory(dir)) includes_.push_back(absl::StrCat("-I", dir.string()));
  }
}

}  // namespace

std::string ToolkitIdentity::DisplayName() const {
  std::string name = absl::StrCat("NVRTC ", major, ".", minor);
  if (!root.empty()) absl::StrAppend(&name, " (", root, ")");
  return name;
}

std::string Toolkit::DefaultRoot() {
  std::string env = EnvValue("CUDA_HOME");
  return env.empty() ? "/usr/local/cuda" : env;
}

absl::StatusOr<std::shared_ptr<const Toolkit>> Toolkit::Load(const std::string& root_arg) {
  auto start = std::chrono::steady_clock::now();
  if (root_arg.empty()) return NoToolkit("\"\"", "the toolkit root is empty");
  std::error_code ec;
  fs::path root = fs::absolute(root_arg, ec).lexically_normal();
  if (ec) root = root_arg;
  std::string root_text = root.string();
  if (root_text.size() > 1 && root_text.back() == '/') root_text.pop_back();
  if (!IsDirectory(root)) return NoToolkit(root_text, "the directory does not exist");

  auto toolkit = std::make_shared<ToolkitImpl>();
  std::vector<fs::path> dirs = LibraryDirs(root);
  if (absl::Status s = toolkit->LoadNvrtc(root_text, dirs); !s.ok()) return s;
  if (absl::Status s = toolkit->LoadNvJitLink(dirs); !s.ok()) return s;
  toolkit->AddIncludes(root);
  toolkit->set_load_micros(std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count());
  return std::shared_ptr<const Toolkit>(std::move(toolkit));
}

}  // namespace kcache
