// Fuzzes the shared object reader of the link interface digest (engine/keys/
// elf_link_interface.h): any bytes give nullopt (left to their bytes) or kDigestHexDigits
// lowercase hex digits, the same twice, and a digest only for bytes that start as a 64-bit ELF
// shared object; never a read past the file, whatever its headers say.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/keys/elf_link_interface.h"
#include "engine/keys/file_digests.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("elf", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0, "memfd_create");
  FUZZ_CHECK(write(fd, data, size) == static_cast<ssize_t>(size), "write to the memfd");
  std::optional<std::string> first = kcache::objects::ElfLinkInterfaceDigest(fd, size);
  std::optional<std::string> again = kcache::objects::ElfLinkInterfaceDigest(fd, size);
  close(fd);
  FUZZ_CHECK(first == again, "two digests of the same bytes differ");
  if (first.has_value()) {
    FUZZ_CHECK(first->size() == kcache::objects::kDigestHexDigits &&
                   first->find_first_not_of("0123456789abcdef") == std::string::npos,
               absl::StrCat("digest '", *first, "'"));
    std::string bytes(reinterpret_cast<const char*>(data), size);
    FUZZ_CHECK(absl::StartsWith(bytes,
                                "\x7f"
                                "ELF\x02\x01"),
               "a digest of bytes that are not ELF64");
  }
  return 0;
}
