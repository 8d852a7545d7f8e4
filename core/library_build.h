// A shared library's build, as kcache names it: the GNU build ID the linker wrote into it (a
// hash of its content, read from a few hundred bytes at the start of the file), else SHA-256 of
// all its bytes. The toolkit's NVRTC (engine/compile/toolkit.h) and an NVRTC compile's key
// (engine/nvrtc/nvrtc_compile.h) are named by it, and the driver by FindCudaDriver's path.
#ifndef KCACHE_CORE_LIBRARY_BUILD_H_
#define KCACHE_CORE_LIBRARY_BUILD_H_

#include <string>

#include "absl/status/statusor.h"

namespace kcache {

// The NT_GNU_BUILD_ID note of a 64-bit ELF file, in hex, read through the program headers. ""
// when the file has none (or is not one, or cannot be read).
std::string ReadElfBuildId(const std::string& path);

// "build-id:<hex>" from the ELF note, else "sha256:<hex>" of the file's bytes.
// FailedPrecondition when the file cannot be read.
absl::StatusOr<std::string> LibraryBuild(const std::string& path);

// The CUDA driver's soname.
inline constexpr char kCudaDriverLibrary[] = "libcuda.so.1";

// The CUDA driver as the dynamic loader finds it for this process: its path, loaded (not
// initialized) and kept loaded, found once. When what the loader finds is kcache's driver
// stand-in (client/cuda/cuda_standin.c, which `kcache run` preloads), the driver that one
// forwards to: whatever names the driver names the real one. "" without a driver.
std::string FindCudaDriver();

}  // namespace kcache

#endif  // KCACHE_CORE_LIBRARY_BUILD_H_
