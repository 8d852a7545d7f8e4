// Reading facts out of a cubin (an ELF file) without a driver.
#ifndef KCACHE_CORE_CUBIN_H_
#define KCACHE_CORE_CUBIN_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache {

// The SM arch a cubin was built for (e.g. 89), read from the ELF header's e_flags bits 8..15
// (CUDA 13 cubins, ELF ABI version 8). InvalidArgument when `elf` is not a CUDA cubin.
absl::StatusOr<int> CubinSmArch(absl::string_view elf);

}  // namespace kcache

#endif  // KCACHE_CORE_CUBIN_H_
