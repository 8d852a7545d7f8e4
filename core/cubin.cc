#include "core/cubin.h"

#include <elf.h>

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

constexpr uint16_t kEmCuda = 190;  // EM_CUDA
// CUDA 13 cubins (ELF ABI version 8) keep the SM in e_flags bits 8..15.
constexpr int kSmShift = 8;
constexpr uint32_t kSmMask = 0xff;
// Below this the field is empty or from another layout (SM 1.0 was the first CUDA GPU).
constexpr int kMinSm = 10;
// st_other bit of a kernel entry's symbol in a cubin.
constexpr unsigned char kStoCudaEntry = 0x10;

absl::Status NotACubin(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("not a CUDA cubin: ", why));
}

// The `index`th entry of a table of `T` at `offset` (entry size `entsize`), or nullopt when it
// lies outside `elf`.
template <typename T>
std::optional<T> ReadAt(absl::string_view elf, uint64_t offset, uint64_t entsize, uint64_t index) {
  if (entsize < sizeof(T) || offset > elf.size()) return std::nullopt;
  if (index > (elf.size() - offset) / entsize) return std::nullopt;
  uint64_t at = offset + index * entsize;
  if (at > elf.size() || elf.size() - at < sizeof(T)) return std::nullopt;
  T out;
  std::memcpy(&out, elf.data() + at, sizeof out);
  return out;
}

// The NUL-terminated name at `offset` of a string table section, or nullopt when it is not
// wholly inside the section.
std::optional<std::string> NameAt(absl::string_view elf, const Elf64_Shdr& strtab,
                                  uint64_t offset) {
  if (strtab.sh_offset > elf.size() || strtab.sh_size > elf.size() - strtab.sh_offset ||
      offset >= strtab.sh_size) {
    return std::nullopt;
  }
  absl::string_view table = elf.substr(strtab.sh_offset, strtab.sh_size).substr(offset);
  size_t end = table.find('\0');
  if (end == absl::string_view::npos) return std::nullopt;
  return std::string(table.substr(0, end));
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

absl::StatusOr<std::vector<std::string>> CubinEntryNames(absl::string_view elf) {
  if (absl::StatusOr<int> sm = CubinSmArch(elf); !sm.ok()) return sm.status();
  Elf64_Ehdr header;
  std::memcpy(&header, elf.data(), sizeof header);
  std::vector<std::string> entries;
  for (uint64_t i = 0; i < header.e_shnum; ++i) {
    std::optional<Elf64_Shdr> symtab =
        ReadAt<Elf64_Shdr>(elf, header.e_shoff, header.e_shentsize, i);
    if (!symtab) return NotACubin(absl::StrCat("section header ", i, " lies outside the file"));
    if (symtab->sh_type != SHT_SYMTAB) continue;
    std::optional<Elf64_Shdr> strtab =
        ReadAt<Elf64_Shdr>(elf, header.e_shoff, header.e_shentsize, symtab->sh_link);
    if (!strtab || symtab->sh_entsize < sizeof(Elf64_Sym)) {
      return NotACubin("the symbol table has no string table or a bad entry size");
    }
    uint64_t count = symtab->sh_size / symtab->sh_entsize;
    for (uint64_t k = 0; k < count; ++k) {
      std::optional<Elf64_Sym> sym =
          ReadAt<Elf64_Sym>(elf, symtab->sh_offset, symtab->sh_entsize, k);
      if (!sym) return NotACubin(absl::StrCat("symbol ", k, " lies outside the file"));
      if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || (sym->st_other & kStoCudaEntry) == 0) {
        continue;
      }
      std::optional<std::string> name = NameAt(elf, *strtab, sym->st_name);
      if (!name || name->empty()) {
        return NotACubin(absl::StrCat("entry symbol ", k, " has no name inside the file"));
      }
      entries.push_back(*std::move(name));
    }
  }
  return entries;
}

}  // namespace kcache
