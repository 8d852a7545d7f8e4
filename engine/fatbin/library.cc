// Library (library.h): a file mapped read-only, classified, and its fatbins found in its ELF
// sections.
#include "engine/fatbin/library.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/cubin.h"

namespace kcache::fatbin {
namespace {

struct Section {
  std::string name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

absl::StatusOr<std::vector<Section>> ReadSections(absl::string_view bytes,
                                                  const std::string& file) {
  if (bytes.size() < sizeof(Elf64_Ehdr) || bytes[EI_CLASS] != ELFCLASS64 ||
      bytes[EI_DATA] != ELFDATA2LSB) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": an ELF file that is not 64-bit little-endian (or truncated)"));
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  std::vector<Section> sections;
  if (eh.e_shnum == 0) return sections;
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > bytes.size() ||
      uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > bytes.size() - eh.e_shoff ||
      eh.e_shstrndx >= eh.e_shnum) {
    return absl::DataLossError(absl::StrCat(file, ": ELF section headers (", eh.e_shnum, " at ",
                                            eh.e_shoff, ") lie outside the file of ", bytes.size(),
                                            " bytes"));
  }
  std::vector<Elf64_Shdr> headers(eh.e_shnum);
  std::memcpy(headers.data(), bytes.data() + eh.e_shoff, headers.size() * sizeof(Elf64_Shdr));
  const Elf64_Shdr& strtab = headers[eh.e_shstrndx];
  if (strtab.sh_offset > bytes.size() || strtab.sh_size > bytes.size() - strtab.sh_offset) {
    return absl::DataLossError(
        absl::StrCat(file, ": the section name table lies outside the file"));
  }
  absl::string_view names = bytes.substr(strtab.sh_offset, strtab.sh_size);
  for (const Elf64_Shdr& h : headers) {
    Section s;
    if (h.sh_name < names.size()) {
      absl::string_view rest = names.substr(h.sh_name);
      s.name = std::string(rest.substr(0, rest.find('\0')));
    }
    s.type = h.sh_type;
    s.flags = h.sh_flags;
    s.addr = h.sh_addr;
    s.offset = h.sh_offset;
    s.size = h.sh_size;
    if (s.type != SHT_NOBITS && (s.offset > bytes.size() || s.size > bytes.size() - s.offset)) {
      return absl::DataLossError(absl::StrCat(file, ": section ", s.name, " (", s.size,
                                              " bytes at ", s.offset, ") lies outside the file of ",
                                              bytes.size(), " bytes (truncated?)"));
    }
    sections.push_back(std::move(s));
  }
  return sections;
}

// Fatbins of a host ELF: every fatbin in .nv_fatbin and __nv_relfatbin (a sequence each), and
// each fatbin a .nvFatBinSegment wrapper points at in another section.
absl::Status ReadHostElf(absl::string_view bytes, const std::string& file,
                         const FatbinLimits& limits, std::vector<FatbinEntry>* out) {
  absl::StatusOr<std::vector<Section>> sections = ReadSections(bytes, file);
  if (!sections.ok()) return sections.status();
  std::set<std::string> scanned = {".nv_fatbin", "__nv_relfatbin"};
  for (const Section& s : *sections) {
    if (s.type == SHT_NOBITS || !scanned.contains(s.name)) continue;
    size_t first = out->size();
    absl::Status parsed =
        ParseFatbins(bytes.substr(s.offset, s.size), true,
                     absl::StrCat(file, " (section ", s.name, ")"), s.offset, limits, out);
    if (!parsed.ok()) return parsed;
    for (size_t i = first; i < out->size(); ++i) {
      (*out)[i].relocatable = s.name == "__nv_relfatbin";
    }
  }
  // Wrappers whose fatbin lives elsewhere (pointers are virtual addresses; an object file's are
  // 0 until relocated, and are skipped).
  for (const Section& seg : *sections) {
    if (seg.name != ".nvFatBinSegment" || seg.type == SHT_NOBITS) continue;
    for (uint64_t w = 0; w + kFatbinWrapperSize <= seg.size; w += kFatbinWrapperSize) {
      uint32_t magic;
      uint64_t data;
      std::memcpy(&magic, bytes.data() + seg.offset + w, 4);
      std::memcpy(&data, bytes.data() + seg.offset + w + 8, 8);
      if (magic != kFatbinWrapperMagic || data == 0) continue;
      for (const Section& s : *sections) {
        if (s.type == SHT_NOBITS || !(s.flags & SHF_ALLOC) || data < s.addr ||
            data - s.addr >= s.size || scanned.contains(s.name)) {
          continue;
        }
        uint64_t at = s.offset + (data - s.addr);
        absl::Status parsed =
            ParseFatbins(bytes.substr(at, s.offset + s.size - at), false,
                         absl::StrCat(file, " (section ", s.name, ")"), at, limits, out);
        if (!parsed.ok()) return parsed;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct Library::Mapping {
  void* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data != nullptr) munmap(data, size);
  }
};

absl::string_view LibraryFormatName(LibraryFormat f) {
  switch (f) {
    case LibraryFormat::kFatbin:
      return "fatbin";
    case LibraryFormat::kHostElf:
      return "ELF";
    case LibraryFormat::kCubin:
      break;
  }
  return "cubin";
}

absl::string_view Library::bytes() const { return bytes_; }

absl::StatusOr<Library> Library::Read(const std::string& path, const FatbinLimits& limits) {
  // O_NONBLOCK: a FIFO's open does not wait for a writer, and is refused below like any file
  // that is not regular (it has no effect on a regular file's reads).
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    std::string what = absl::StrCat("cannot open library ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(what);
    if (err == EACCES) return absl::PermissionDeniedError(what);
    return absl::FailedPreconditionError(what);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  auto mapping = std::make_shared<Mapping>();
  if (st.st_size > 0) {
    void* data = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      int err = errno;
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot map library ", path, ": ", std::strerror(err)));
    }
    mapping->data = data;
    mapping->size = static_cast<size_t>(st.st_size);
  }
  close(fd);
  absl::StatusOr<Library> library = FromBytes(
      absl::string_view(static_cast<const char*>(mapping->data), mapping->size), path, limits);
  if (library.ok()) library->mapping_ = std::move(mapping);
  return library;
}

absl::StatusOr<Library> Library::FromBytes(absl::string_view bytes, const std::string& name,
                                           const FatbinLimits& limits) {
  Library library;
  library.path_ = name;
  library.bytes_ = bytes;
  if (bytes.size() >= 4 && bytes.substr(0, 4) == absl::string_view("\x7f"
                                                                   "ELF",
                                                                   4)) {
    if (IsCudaElf(bytes)) {
      library.format_ = LibraryFormat::kCubin;
      absl::StatusOr<int> arch = CubinSmArch(bytes);
      if (!arch.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": ", arch.status().message()));
      }
      FatbinEntry entry;
      entry.kind = EntryKind::kSass;
      entry.raw_kind = 2;
      entry.arch = *arch;
      entry.payload_size = bytes.size();
      entry.stored = bytes;
      library.entries_.push_back(std::move(entry));
      return library;
    }
    library.format_ = LibraryFormat::kHostElf;
    absl::Status read = ReadHostElf(bytes, name, limits, &library.entries_);
    if (!read.ok()) return read;
    return library;
  }
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), &kFatbinMagic, 4) == 0) {
    library.format_ = LibraryFormat::kFatbin;
    absl::Status read = ParseFatbins(bytes, true, name, 0, limits, &library.entries_);
    if (!read.ok()) return read;
    return library;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name,
                   ": neither a fatbin (magic 0xba55ed50) nor an ELF file (a shared object, an "
                   "executable or a cubin)"));
}

}  // namespace kcache::fatbin
