// A CUDA toolkit loaded at run time: libnvrtc (and libnvJitLink if present) dlopen'd from a
// root directory. Nothing here links a CUDA library.
#ifndef KCACHE_ENGINE_COMPILE_TOOLKIT_H_
#define KCACHE_ENGINE_COMPILE_TOOLKIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kcache {

struct NvrtcApi;      // function pointers into libnvrtc (toolkit.cc / nvrtc_api.h)
struct NvJitLinkApi;  // function pointers into libnvJitLink

// What identifies a toolkit's output: the NVRTC version plus the exact library build, since
// 13.0 and a patched 13.0 may emit different code.
struct ToolkitIdentity {
  int major = 0;  // nvrtcVersion
  int minor = 0;
  std::string build;                // version/build strings read out of libnvrtc + builtins
  std::string id;                   // "nvrtc-13.0+<12 hex of SHA-256(build)>": goes into keys
  std::string root;                 // where it was loaded from: display only, not in `id`
  std::string DisplayName() const;  // "NVRTC 13.0 (/usr/local/cuda)"
  // Version order (13.0 is newer than 12.9); builds of one version are not ordered.
  bool NewerThan(const ToolkitIdentity& other) const {
    return major != other.major ? major > other.major : minor > other.minor;
  }
};

// Loaded once, then immutable and thread-safe.
class Toolkit {
 public:
  // $CUDA_HOME if set, else /usr/local/cuda.
  static std::string DefaultRoot();

  // dlopens <root>/lib64/libnvrtc.so(.13) (also <root>/lib, targets/*/lib; the highest
  // libnvrtc.so.N there, so a 12.x or 11.x toolkit loads too) and, if present, libnvJitLink.
  // Every compile gets -I<root>/include and -I<root>/include/cccl; a root that is a pip
  // wheel's .../nvidia/cuda_nvrtc also its sibling wheels' cuda_runtime/include and
  // cuda_cccl/include (nvidia-cuda-runtime-cu12, nvidia-cuda-cccl-cu12). FailedPrecondition naming
  // the root and $CUDA_HOME when libnvrtc is absent or unusable, e.g. "no CUDA toolkit at
  // /opt/cuda: libnvrtc.so not found in /opt/cuda/lib64; install the CUDA toolkit there or set
  // CUDA_HOME / --toolkit".
  static absl::StatusOr<std::shared_ptr<const Toolkit>> Load(const std::string& root);

  virtual ~Toolkit() = default;
  virtual const std::string& root() const = 0;
  virtual const ToolkitIdentity& identity() const = 0;
  // nvrtcGetSupportedArchs, e.g. {75, 80, 86, ..., 121}.
  virtual const std::vector<int>& supported_archs() const = 0;
  // -I options added to every compile: <root>/include and <root>/include/cccl.
  virtual const std::vector<std::string>& include_options() const = 0;
  virtual const NvrtcApi& nvrtc() const = 0;
  // Null when libnvJitLink was not found (LTO-IR linking unavailable).
  virtual const NvJitLinkApi* nvjitlink() const = 0;
  // Wall time Load took (dlopen of libnvrtc, builtins and nvJitLink, plus the identity).
  virtual int64_t load_micros() const { return 0; }
};

}  // namespace kcache

#endif  // KCACHE_ENGINE_COMPILE_TOOLKIT_H_
