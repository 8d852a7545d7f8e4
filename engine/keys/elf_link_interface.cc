#include "engine/keys/elf_link_interface.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/file_io.h"
#include "core/xxh128.h"

namespace kcache::objects {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "headers are read in place");

constexpr uint32_t kShtRelr = 19;  // SHT_RELR, newer than some <elf.h>
constexpr size_t kReadChunk = size_t{1} << 20;
// Section names are read whole; libtorch_cpu.so's are 300 bytes. More is not a library's.
constexpr uint64_t kMaxSectionNames = uint64_t{1} << 20;

bool InFile(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

bool ReadExactly(int fd, uint64_t offset, void* into, size_t length) {
  return PreadFull(fd, offset, static_cast<char*>(into), length) == length;
}

// Hashes `length` bytes at `offset`, a chunk at a time: a section's size is the file's word.
bool HashRange(int fd, uint64_t offset, uint64_t length, Xxh128& hash) {
  std::string buffer;
  while (length > 0) {
    size_t take = static_cast<size_t>(std::min<uint64_t>(length, kReadChunk));
    buffer.resize(take);
    if (!ReadExactly(fd, offset, buffer.data(), take)) return false;
    hash.Update(buffer);
    offset += take;
    length -= take;
  }
  return true;
}

// Which sections' contents the digest leaves out: code, data, relocations, the static symbols
// (and their names, unless the dynamic symbols or the section names share them).
template <typename NameOf>
std::vector<bool> SkippedSections(const Elf64_Ehdr& header, const std::vector<Elf64_Shdr>& sections,
                                  const NameOf& name_of) {
  std::vector<bool> skipped(sections.size(), false), dynamic_names(sections.size(), false);
  for (const Elf64_Shdr& section : sections) {
    if ((section.sh_type == SHT_DYNSYM || section.sh_type == SHT_DYNAMIC) &&
        section.sh_link < sections.size()) {
      dynamic_names[section.sh_link] = true;
    }
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    const Elf64_Shdr& section = sections[i];
    switch (section.sh_type) {
      case SHT_PROGBITS:
        skipped[i] = !absl::StartsWith(name_of(section), ".gnu.warning");
        break;
      case SHT_NOBITS:
      case SHT_REL:
      case SHT_RELA:
      case kShtRelr:
        skipped[i] = true;
        break;
      case SHT_SYMTAB:
        skipped[i] = true;
        if (section.sh_link < sections.size() && !dynamic_names[section.sh_link] &&
            section.sh_link != header.e_shstrndx) {
          skipped[section.sh_link] = true;
        }
        break;
      default:
        break;
    }
  }

  return skipped;
}

}  // namespace

std::optional<std::string> ElfLinkInterfaceDigest(int fd, uint64_t size) {
  Elf64_Ehdr header;
  if (size < sizeof(header) || !ReadExactly(fd, 0, &header, sizeof(header))) return std::nullopt;
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_type != ET_DYN) {
    return std::nullopt;
  }
  // Extended numbering (e_shnum 0, e_shstrndx SHN_XINDEX) is left to the bytes.
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0 ||
      header.e_shstrndx == SHN_UNDEF || header.e_shstrndx >= header.e_shnum ||
      (header.e_phnum != 0 && header.e_phentsize != sizeof(Elf64_Phdr))) {
    return std::nullopt;
  }
  uint64_t section_bytes = uint64_t{header.e_shnum} * sizeof(Elf64_Shdr);
  uint64_t program_bytes = uint64_t{header.e_phnum} * sizeof(Elf64_Phdr);
  if (!InFile(header.e_shoff, section_bytes, size) ||
      !InFile(header.e_phoff, program_bytes, size)) {
    return std::nullopt;
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (!ReadExactly(fd, header.e_shoff, sections.data(), section_bytes)) return std::nullopt;
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type != SHT_NOBITS && !InFile(section.sh_offset, section.sh_size, size)) {
      return std::nullopt;
    }
  }
  const Elf64_Shdr& names_section = sections[header.e_shstrndx];
  if (names_section.sh_type != SHT_STRTAB || names_section.sh_size > kMaxSectionNames) {
    return std::nullopt;
  }
  std::string names(names_section.sh_size, '\0');
  if (!ReadExactly(fd, names_section.sh_offset, names.data(), names.size())) return std::nullopt;
  auto name_of = [&names](const Elf64_Shdr& section) -> absl::string_view {
    if (section.sh_name >= names.size()) return {};
    return absl::string_view(names.c_str() + section.sh_name);  // NUL-terminated in `names`
  };

  std::vector<bool> skipped = SkippedSections(header, sections, name_of);

  Xxh128 hash;
  hash.Update(
      absl::string_view("kcache.elf-link-interface.v2", sizeof("kcache.elf-link-interface.v2")));
  hash.Update(absl::string_view(reinterpret_cast<const char*>(&header), sizeof(header)));
  if (!HashRange(fd, header.e_phoff, program_bytes, hash)) return std::nullopt;
  hash.Update(absl::string_view(reinterpret_cast<const char*>(sections.data()), section_bytes));
  for (size_t i = 0; i < sections.size(); ++i) {
    if (skipped[i] || sections[i].sh_type == SHT_NOBITS) continue;
    hash.Update(absl::StrCat("section ", i, "\n"));
    if (!HashRange(fd, sections[i].sh_offset, sections[i].sh_size, hash)) return std::nullopt;
  }
  return hash.Finish().Hex();
}

}  // namespace kcache::objects
