// The CUDA code a file on disk carries: a raw fatbin, a host ELF (shared object, executable or
// object file) with fatbins embedded, or a lone cubin. The file is mapped read-only, not read
// into memory; the entries point into the mapping.
#ifndef KCACHE_ENGINE_FATBIN_LIBRARY_H_
#define KCACHE_ENGINE_FATBIN_LIBRARY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/fatbin/fatbin.h"

namespace kcache::fatbin {

// What kind of file a library is.
enum class LibraryFormat : uint8_t {
  kFatbin,   // a raw fatbin (nvcc -fatbin)
  kHostElf,  // an ELF for the host CPU: fatbins in .nv_fatbin, __nv_relfatbin, and wherever
             // a .nvFatBinSegment wrapper points
  kCubin,    // an ELF for CUDA (e_machine EM_CUDA): one SASS entry, its SM from e_flags
};
absl::string_view LibraryFormatName(LibraryFormat f);  // "fatbin", "ELF", "cubin"

// A library's entries, and the mapping they point into. Copies share the mapping; the entries'
// `stored` views stay valid while any copy lives.
class Library {
 public:
  const std::string& path() const { return path_; }
  LibraryFormat format() const { return format_; }
  const std::vector<FatbinEntry>& entries() const { return entries_; }
  // The whole file's bytes.
  absl::string_view bytes() const;

  // Opens and reads `path`. Errors name the path:
  //   NotFound / PermissionDenied / FailedPrecondition  the file cannot be opened or mapped
  //   InvalidArgument  not a regular file (a FIFO, a device, a directory: refused once opened
  //                    without waiting, before anything is read); neither a fatbin nor an ELF
  //                    file; an ELF that is not 64-bit
  //                    little-endian; a damaged fatbin (ParseFatbins)
  //   DataLoss         ELF section headers or sections outside the file; a damaged fatbin
  // A host ELF without CUDA code is not an error: no entries.
  // A lone cubin's SASS variant is always plain: a cubin's e_flags do not tell sm_90a
  // from sm_90 (only a fatbin entry's flags do).
  static absl::StatusOr<Library> Read(const std::string& path, const FatbinLimits& limits = {});

  // Reads `bytes` (owned by the caller, who keeps them alive) as the file `name`: for tests.
  static absl::StatusOr<Library> FromBytes(absl::string_view bytes, const std::string& name,
                                           const FatbinLimits& limits = {});

 private:
  struct Mapping;
  std::string path_;
  LibraryFormat format_ = LibraryFormat::kFatbin;
  std::shared_ptr<Mapping> mapping_;  // null for FromBytes
  absl::string_view bytes_;
  std::vector<FatbinEntry> entries_;
};

}  // namespace kcache::fatbin

#endif  // KCACHE_ENGINE_FATBIN_LIBRARY_H_
