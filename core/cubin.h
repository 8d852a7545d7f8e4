// Reading facts out of a cubin (an ELF file) without a driver.
#ifndef KCACHE_CORE_CUBIN_H_
#define KCACHE_CORE_CUBIN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache {

// The SM arch a cubin was built for (e.g. 89), read from the ELF header's e_flags bits 8..15
// (CUDA 13 cubins, ELF ABI version 8). InvalidArgument when `elf` is not a CUDA cubin.
absl::StatusOr<int> CubinSmArch(absl::string_view elf);

// The kernel entry points (__global__ functions, by their ELF symbol names: an extern "C" name or
// a lowered one) the cubin defines, in symbol-table order: the function symbols marked as CUDA
// entries (st_other STO_CUDA_ENTRY). InvalidArgument, naming what is wrong, for a file that is
// not a cubin or whose section or symbol tables lie outside it. Reads nothing past `elf`.
absl::StatusOr<std::vector<std::string>> CubinEntryNames(absl::string_view elf);

// Whether `bytes` start like a CUDA ELF file (a cubin): the ELF magic number and e_machine
// EM_CUDA (190). Nothing else is checked.
bool IsCudaElf(absl::string_view bytes);

// The CUDA toolkit whose ptxas built a cubin: 13.0, 12.9.
struct CubinToolkitVersion {
  int major = 0;
  int minor = 0;
};

// The toolkit that built the cubin `elf`, read from its .note.nv.cuinfo note (CUDA 13 writes one)
// and the EIATTR_CUDA_API_VERSION attribute of its .nv.info sections (CUDA 12 and 13 write one per
// kernel). InvalidArgument, naming what is wrong, for a file that is not a 64-bit CUDA cubin,
// whose section headers lie outside it, that names no toolkit, or that names two. Reads nothing
// past `elf`. The oldest driver that loads the cubin is then MinDriverFor (core/artifact.h).
absl::StatusOr<CubinToolkitVersion> CubinToolkit(absl::string_view elf);

}  // namespace kcache

#endif  // KCACHE_CORE_CUBIN_H_
