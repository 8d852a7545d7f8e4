#include "core/cubin.h"

#include <elf.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

constexpr uint16_t kEmCuda = 190;  // EM_CUDA
// CUDA 13 cubins (ELF ABI version 8) keep the SM in e_flags bits 8..15.
constexpr int kSmShift = 8;
constexpr uint32_t kSmMask = 0xff;
// Below this the field is empty or from another layout (SM 1.0 was the first CUDA GPU).
constexpr int kMinSm = 10;

absl::Status NotACubin(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("not a CUDA cubin: ", why));
}

}  // namespace

absl::StatusOr<int> CubinSmArch(absl::string_view elf) {
  if (elf.size() < sizeof(Elf64_Ehdr)) {
    return NotACubin(absl::StrCat(elf.size(), " bytes is shorter than a 64-bit ELF header (",
                                  sizeof(Elf64_Ehdr), " bytes)"));
  }
  Elf64_Ehdr header;
  std::memcpy(&header, elf.data(), sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return NotACubin("no ELF magic number");
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64) return NotACubin("not a 64-bit ELF file");
  if (header.e_ident[EI_DATA] != ELFDATA2LSB) return NotACubin("not a little-endian ELF file");
  if (header.e_machine != kEmCuda) {
    return NotACubin(
        absl::StrCat("ELF machine is ", header.e_machine, ", not EM_CUDA (", kEmCuda, ")"));
  }
  int sm = static_cast<int>((header.e_flags >> kSmShift) & kSmMask);
  if (sm < kMinSm) {
    return NotACubin(absl::StrCat(
        "e_flags 0x", absl::Hex(header.e_flags), " holds no SM in bits 8..15 (ELF ABI version ",
        static_cast<int>(header.e_ident[EI_ABIVERSION]), "; CUDA 13 cubins use version 8)"));
  }
  return sm;
}

}  // namespace kcache
