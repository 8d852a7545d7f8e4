#include "core/cubin.h"

#include <elf.h>

#include <cstring>
#include <optional>

#include "absl/strings/match.h"
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

// The header of a 64-bit little-endian EM_CUDA ELF file, or InvalidArgument naming what it is not.
absl::StatusOr<Elf64_Ehdr> CudaElfHeader(absl::string_view elf) {
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
  return header;
}

}  // namespace

absl::StatusOr<int> CubinSmArch(absl::string_view elf) {
  absl::StatusOr<Elf64_Ehdr> cuda = CudaElfHeader(elf);
  if (!cuda.ok()) return cuda.status();
  const Elf64_Ehdr& header = *cuda;
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

namespace {

// What records the toolkit in a cubin (values major * 10 + minor: 130 is CUDA 13.0):
// the .note.nv.cuinfo note, owner "NVIDIA Corp", type 0x3e8, description u16 layout version (2),
// u16 SM, u16 toolkit, u16 padding (CUDA 13 writes it; 12.x does not), and the
// EIATTR_CUDA_API_VERSION attribute (0x37, a 4-byte value) in the .nv.info sections (section type
// SHT_LOPROC), which every kernel's section carries in CUDA 12 and 13 cubins alike.
constexpr absl::string_view kNoteOwner = "NVIDIA Corp";
constexpr uint32_t kCuinfoNoteType = 0x3e8;
constexpr uint16_t kCuinfoLayout = 2;
constexpr uint32_t kNvInfoSectionType = SHT_LOPROC;
constexpr uint8_t kInfoFormatSized = 0x04;  // EIFMT_SVAL: u16 size, then that many bytes
constexpr uint8_t kAttrCudaApiVersion = 0x37;

uint32_t LoadU32(const char* at) {
  uint32_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

uint16_t LoadU16(const char* at) {
  uint16_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// The toolkits a cubin names (major * 10 + minor), as they are read: the first, and whether
// another differs. Bounded: no list of every record.
struct ToolkitsNamed {
  uint32_t first = 0;
  uint32_t other = 0;  // when `two`
  bool any = false;
  bool two = false;

  void Add(uint32_t version) {
    if (!any) {
      any = true;
      first = version;
    } else if (version != first && !two) {
      two = true;
      other = version;
    }
  }
};

// The bytes of `section`, or nullopt when they lie outside `elf` (or it has none in the file).
std::optional<absl::string_view> SectionBytes(absl::string_view elf, const Elf64_Shdr& section) {
  if (section.sh_type == SHT_NOBITS || section.sh_offset > elf.size() ||
      section.sh_size > elf.size() - section.sh_offset) {
    return std::nullopt;
  }
  return elf.substr(section.sh_offset, section.sh_size);
}

// Adds the toolkit of every cuinfo note in a SHT_NOTE section to *found. Stops at a note whose
// sizes run past the section.
void ReadCuinfoNotes(absl::string_view notes, ToolkitsNamed* found) {
  constexpr uint64_t kHeader = 12;  // namesz, descsz, type
  while (notes.size() >= kHeader) {
    uint64_t name_size = LoadU32(notes.data()), desc_size = LoadU32(notes.data() + 4);
    uint32_t type = LoadU32(notes.data() + 8);
    uint64_t name_padded = (name_size + 3) / 4 * 4, desc_padded = (desc_size + 3) / 4 * 4;
    if (name_padded > notes.size() - kHeader ||
        desc_padded > notes.size() - kHeader - name_padded) {
      return;
    }
    absl::string_view name = notes.substr(kHeader, name_size);
    absl::string_view desc = notes.substr(kHeader + name_padded, desc_size);
    if (!name.empty() && name.back() == '\0') name.remove_suffix(1);
    if (name == kNoteOwner && type == kCuinfoNoteType && desc.size() >= 6 &&
        LoadU16(desc.data()) == kCuinfoLayout) {
      found->Add(LoadU16(desc.data() + 4));
    }
    notes.remove_prefix(kHeader + name_padded + desc_padded);
  }
}

// Adds every EIATTR_CUDA_API_VERSION of a .nv.info section to *found: records of u8 format,
// u8 attribute, then a u16 value or, for the sized format, a u16 size and that many bytes.
// Stops at a record that runs past the section.
void ReadApiVersionAttributes(absl::string_view info, ToolkitsNamed* found) {
  constexpr uint64_t kHeader = 4;
  while (info.size() >= kHeader) {
    auto format = static_cast<uint8_t>(info[0]), attribute = static_cast<uint8_t>(info[1]);
    uint64_t size = format == kInfoFormatSized ? LoadU16(info.data() + 2) : 0;
    if (size > info.size() - kHeader) return;
    if (format == kInfoFormatSized && attribute == kAttrCudaApiVersion && size == 4) {
      found->Add(LoadU32(info.data() + kHeader));
    }
    info.remove_prefix(kHeader + size);
  }
}

}  // namespace

bool IsCudaElf(absl::string_view bytes) {
  constexpr size_t kMachineAt = 18;  // e_machine, in 32- and 64-bit headers alike
  return bytes.size() >= kMachineAt + 2 && absl::StartsWith(bytes, ELFMAG) &&
         LoadU16(bytes.data() + kMachineAt) == kEmCuda;
}

absl::StatusOr<CubinToolkitVersion> CubinToolkit(absl::string_view elf) {
  absl::StatusOr<Elf64_Ehdr> header = CudaElfHeader(elf);
  if (!header.ok()) return header.status();
  ToolkitsNamed found;
  uint64_t scanned = 0;  // bytes of sections read: at most the file's (sections may not overlap)
  for (uint64_t i = 0; i < header->e_shnum; ++i) {
    std::optional<Elf64_Shdr> section =
        ReadAt<Elf64_Shdr>(elf, header->e_shoff, header->e_shentsize, i);
    if (!section) return NotACubin(absl::StrCat("section header ", i, " lies outside the file"));
    if (section->sh_type != SHT_NOTE && section->sh_type != kNvInfoSectionType) continue;
    std::optional<absl::string_view> bytes = SectionBytes(elf, *section);
    if (!bytes) return NotACubin(absl::StrCat("section ", i, " lies outside the file"));
    scanned += bytes->size();
    if (scanned > elf.size()) return NotACubin("its note and .nv.info sections overlap");
    if (section->sh_type == SHT_NOTE) {
      ReadCuinfoNotes(*bytes, &found);
    } else {
      ReadApiVersionAttributes(*bytes, &found);
    }
  }
  if (!found.any) {
    return absl::InvalidArgumentError(
        "the cubin names no toolkit: no .note.nv.cuinfo note and no EIATTR_CUDA_API_VERSION");
  }
  if (found.two || found.first < 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cubin names toolkit ", found.first,
                     found.two ? absl::StrCat(" and toolkit ", found.other) : "",
                     " (major * 10 + minor): not one CUDA release of 1.0 or later"));
  }
  return CubinToolkitVersion{static_cast<int>(found.first / 10),
                             static_cast<int>(found.first % 10)};
}

}  // namespace kcache
