#include "core/library_build.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/sha256.h"

namespace kcache {
namespace {

bool PreadAll(int fd, void* buf, size_t size, off_t offset) {
  return pread(fd, buf, size, offset) == static_cast<ssize_t>(size);
}

// SHA-256 of a whole file, in hex: the fallback for a library built without a build id.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::FailedPreconditionError(absl::StrCat("cannot read ", path));
  Sha256 sha;
  std::string buf(1 << 20, '\0');
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    sha.Update(absl::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  return DigestHex(sha.Finish());
}

}  // namespace

std::string ReadElfBuildId(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string result;
  Elf64_Ehdr eh;
  if (PreadAll(fd, &eh, sizeof eh, 0) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
    for (int i = 0; i < eh.e_phnum && result.empty(); ++i) {
      Elf64_Phdr ph;
      if (!PreadAll(fd, &ph, sizeof ph, eh.e_phoff + i * sizeof ph)) break;
      if (ph.p_type != PT_NOTE || ph.p_filesz > (1 << 16)) continue;
      std::string notes(ph.p_filesz, '\0');
      if (!PreadAll(fd, notes.data(), notes.size(), ph.p_offset)) continue;
      size_t pos = 0;
      while (pos + sizeof(Elf64_Nhdr) <= notes.size()) {
        Elf64_Nhdr nh;
        std::memcpy(&nh, notes.data() + pos, sizeof nh);
        size_t name_at = pos + sizeof nh;
        size_t desc_at = name_at + ((nh.n_namesz + 3) & ~size_t{3});
        size_t next = desc_at + ((nh.n_descsz + 3) & ~size_t{3});
        if (next > notes.size()) break;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            std::memcmp(notes.data() + name_at, "GNU", 4) == 0 && nh.n_descsz > 0) {
          result = absl::BytesToHexString(absl::string_view(notes.data() + desc_at, nh.n_descsz));
          break;
        }
        pos = next;
      }
    }
  }
  close(fd);
  return result;
}

absl::StatusOr<std::string> LibraryBuild(const std::string& path) {
  std::string build_id = ReadElfBuildId(path);
  if (!build_id.empty()) return absl::StrCat("build-id:", build_id);
  absl::StatusOr<std::string> sha = Sha256OfFile(path);
  if (!sha.ok()) return sha.status();
  return absl::StrCat("sha256:", *sha);
}

std::string FindCudaDriver() {
  static const std::string* found = [] {
    auto* path = new std::string;
    void* handle = dlopen(kCudaDriverLibrary, RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr) return path;
    // kcache's stand-in exports the driver it forwards to (the real driver exports no such name).
    auto real = reinterpret_cast<const char* (*)()>(dlsym(handle, "kcache_cuda_real_driver"));
    struct link_map* map = nullptr;
    if (real != nullptr) {
      *path = real();
    } else if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr &&
               map->l_name != nullptr) {
      *path = map->l_name;
    }
    return path;
  }();
  return *found;
}

}  // namespace kcache
