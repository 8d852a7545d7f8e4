#include "client/cli/elf_functions.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/file_io.h"

namespace kcache::cli {
namespace {

// A file read by offset; closed when done.
class File {
 public:
  explicit File(const std::string& path) : fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_ >= 0 && fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = st.st_size;
  }
  ~File() {
    if (fd_ >= 0) close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // `length` bytes at `offset`, all inside the file; false otherwise.
  bool Read(uint64_t offset, uint64_t length, void* out) const {
    if (fd_ < 0 || offset > size_ || length > size_ - offset) return false;
    return PreadFull(fd_, offset, static_cast<char*>(out), length) == length;
  }

 private:
  int fd_;
  uint64_t size_ = 0;
};

constexpr uint64_t kMaxTableBytes = uint64_t{64} << 20;

}  // namespace

absl::StatusOr<std::set<std::string>> DynamicFunctions(const std::string& path) {
  auto refused = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", why));
  };
  File file(path);
  Elf64_Ehdr header;
  if (!file.Read(0, sizeof header, &header)) return refused("cannot be read as an ELF file");
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_shentsize != sizeof(Elf64_Shdr)) {
    return refused("not a 64-bit little-endian ELF file");
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (sections.empty() ||
      !file.Read(header.e_shoff, sections.size() * sizeof(Elf64_Shdr), sections.data())) {
    return refused("its section headers are not inside it");
  }
  for (const Elf64_Shdr& dynsym : sections) {
    if (dynsym.sh_type != SHT_DYNSYM) continue;
    if (dynsym.sh_link >= sections.size() || dynsym.sh_entsize != sizeof(Elf64_Sym) ||
        dynsym.sh_size > kMaxTableBytes || sections[dynsym.sh_link].sh_size > kMaxTableBytes) {
      return refused("its dynamic symbol table is malformed");
    }
    const Elf64_Shdr& strtab = sections[dynsym.sh_link];
    std::vector<Elf64_Sym> symbols(dynsym.sh_size / sizeof(Elf64_Sym));
    std::string names(strtab.sh_size, '\0');
    if (!file.Read(dynsym.sh_offset, symbols.size() * sizeof(Elf64_Sym), symbols.data()) ||
        !file.Read(strtab.sh_offset, names.size(), names.data())) {
      return refused("its dynamic symbol table is not inside it");
    }
    std::set<std::string> functions;
    for (const Elf64_Sym& symbol : symbols) {
      unsigned type = ELF64_ST_TYPE(symbol.st_info), bind = ELF64_ST_BIND(symbol.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || symbol.st_shndx == SHN_UNDEF ||
          (bind != STB_GLOBAL && bind != STB_WEAK) || symbol.st_name >= names.size()) {
        continue;
      }
      functions.insert(std::string(names.c_str() + symbol.st_name));
    }
    return functions;
  }
  return refused("it has no dynamic symbol table");
}

}  // namespace kcache::cli
