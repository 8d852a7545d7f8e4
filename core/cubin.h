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

}  // namespace kcache

#endif  // KCACHE_CORE_CUBIN_H_
