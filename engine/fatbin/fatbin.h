// Reading CUDA fatbins without a driver: the entries (PTX, SASS, LTO-IR) of one fatbin, and each
// entry's payload decompressed. The layout, as CUDA 13.0's nvcc and fatbinary write it, is
// written down in docs/ptx-libraries.md ("The fatbin format").
//
// Every length is checked against the bytes it describes: a fatbin that is damaged (truncated,
// a length past its end, an unknown version, a payload that does not decompress to the size its
// header declares) is an error naming the file, the offset and what is wrong, and nothing is read
// past the bytes given. Memory is bounded: no payload larger than FatbinLimits allows is
// decompressed.
#ifndef KCACHE_ENGINE_FATBIN_FATBIN_H_
#define KCACHE_ENGINE_FATBIN_FATBIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/target.h"

namespace kcache::fatbin {

inline constexpr uint32_t kFatbinMagic = 0xBA55ED50;  // the fatbin header's first 4 bytes
inline constexpr size_t kFatbinHeaderSize = 16;       // magic, version, header size, data size
// __fatBinC_Wrapper_t, with which a host program registers a fatbin (in .nvFatBinSegment, and
// given to the driver by the CUDA runtime): {u32 magic, u32 version, u64 data (the fatbin's
// address), u64 filename_or_fatbins}. Version 1 points at one fatbin; 2 at relocatable code.
inline constexpr uint32_t kFatbinWrapperMagic = 0x466243B1;
inline constexpr size_t kFatbinWrapperSize = 24;
inline constexpr size_t kMinEntryHeaderSize = 64;  // an entry header's fixed fields

// The entry flags this reader understands (the header's u64 at +0x28).
inline constexpr uint64_t kFlag64Bit = 0x1;
inline constexpr uint64_t kFlagDebug = 0x2;
inline constexpr uint64_t kFlagLz4 = 0x2000;             // payload is one LZ4 block
inline constexpr uint64_t kFlagZstd = 0x8000;            // payload is one zstd frame
inline constexpr uint64_t kFlagArchSpecific = 0x100000;  // sm_90a / compute_90a
inline constexpr uint64_t kFlagFamily = 0x200000;        // sm_100f / compute_100f

enum class EntryKind : uint8_t { kPtx, kSass, kLtoir, kOther };
absl::string_view EntryKindName(EntryKind kind);  // "PTX", "SASS", "LTO-IR", "other"

enum class Compression : uint8_t { kNone, kLz4, kZstd };
absl::string_view CompressionName(Compression c);  // "none", "lz4", "zstd"

// One entry of a fatbin. `stored` points into the bytes the entry was read from (borrowed:
// valid while they are).
struct FatbinEntry {
  EntryKind kind = EntryKind::kOther;
  uint16_t raw_kind = 0;  // the header's kind: 1 PTX, 2 ELF (SASS), 8 LTO-IR
  int arch = 0;           // SM or virtual arch as NVRTC numbers it: 75, 90, 120
  ArchVariant variant = ArchVariant::kNone;
  Compression compression = Compression::kNone;
  uint64_t flags = 0;         // the header's flags, all of them
  uint64_t payload_size = 0;  // decompressed (or stored, when not compressed) bytes
  absl::string_view stored;   // the payload as stored (compressed bytes when compressed)
  std::string jit_options;    // options text the header carries (LTO-IR: "-ftz=0 ..."); may be ""
  uint64_t offset = 0;        // of the entry header in the file, for messages
  bool relocatable = false;   // relocatable device code (a __nv_relfatbin section)
  // Which fatbin of the input it is in (0, 1, ... in file order; fatbins without entries take
  // no number): one fatbin is one module's code, which the driver loads as a whole.
  size_t fatbin = 0;

  // sm_XY[a|f] for SASS, compute_XY[a|f] for PTX and LTO-IR.
  Target target() const;
  // "PTX compute_75 (zstd, 814 B)", for listings.
  std::string Describe() const;
};

struct FatbinLimits {
  // The largest payload an entry may decompress to (and the largest declared size accepted).
  // A header declaring more is InvalidArgument before anything is allocated.
  uint64_t max_payload_bytes = uint64_t{512} << 20;
};

// Parses the fatbins in `bytes`, which hold one fatbin at `offset` (bytes before it are not
// read), or, when `sequence` is true, fatbins one after another up to the end of `bytes`, each
// starting 8-aligned, with zero padding between them allowed. `file` names the input in messages
// and `base` is where `bytes` start in that file (offsets in messages are file offsets).
// Appends the entries to `out` in file order. Errors:
//   InvalidArgument  no fatbin magic where a fatbin must start; an unknown fatbin version; an
//                    entry that claims both compressions; a declared payload over the limit
//   DataLoss         a header or payload that runs past the end of the fatbin or of `bytes`;
//                    entries that do not fill the fatbin's declared size exactly
// Messages read "<file>: fatbin at offset N: <what>".
absl::Status ParseFatbins(absl::string_view bytes, bool sequence, absl::string_view file,
                          uint64_t base, const FatbinLimits& limits, std::vector<FatbinEntry>* out);

// The entry's payload: decompressed (LZ4 block or zstd frame) or copied. For PTX, the text up
// to its first NUL (fatbins pad PTX with NULs, compressed or not, so the same PTX reads the same
// either way). DataLoss naming `file` and the entry's offset when the payload does not
// decompress, or not to exactly the declared size; InvalidArgument over the limit.
absl::StatusOr<std::string> EntryPayload(const FatbinEntry& entry, absl::string_view file,
                                         const FatbinLimits& limits = {});

}  // namespace kcache::fatbin

#endif  // KCACHE_ENGINE_FATBIN_FATBIN_H_
