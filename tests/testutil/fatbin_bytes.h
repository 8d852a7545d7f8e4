// Fatbins made by hand, laid out as nvcc 13.0 lays them out (docs/ptx-libraries.md, "The fatbin
// format"), with plain, LZ4 or zstd payloads: for tests of engine/fatbin that need no nvcc. A
// test including this links LZ4 and zstd (tests/CMakeLists.txt).
#ifndef KCACHE_TESTS_TESTUTIL_FATBIN_BYTES_H_
#define KCACHE_TESTS_TESTUTIL_FATBIN_BYTES_H_

#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/fatbin/fatbin.h"

namespace kcache::fatbin::testing {

template <typename T>
void Put(std::string& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof(T));
}

// One entry as nvcc 13.0 lays it out: an 80-byte header, then the payload padded to 8.
struct HandEntry {
  uint16_t kind = 1;  // 1 PTX, 2 ELF
  uint32_t arch = 75;
  uint64_t flags = 0x11;
  std::string payload;  // uncompressed
  Compression compression = Compression::kNone;
  std::string options;  // the header's options text, at most 8 bytes (at 0x48)
};

inline std::string EntryBytes(const HandEntry& e) {
  std::string stored = e.payload;
  uint64_t flags = e.flags;
  if (e.compression == Compression::kLz4) {
    stored.resize(LZ4_compressBound(static_cast<int>(e.payload.size())));
    stored.resize(LZ4_compress_default(e.payload.data(), stored.data(),
                                       static_cast<int>(e.payload.size()),
                                       static_cast<int>(stored.size())));
    flags |= kFlagLz4;
  } else if (e.compression == Compression::kZstd) {
    stored.resize(ZSTD_compressBound(e.payload.size()));
    stored.resize(
        ZSTD_compress(stored.data(), stored.size(), e.payload.data(), e.payload.size(), 1));
    flags |= kFlagZstd;
  }
  size_t padded = (stored.size() + 7) & ~size_t{7};
  std::string out(80, '\0');
  Put<uint16_t>(out, 0, e.kind);
  Put<uint16_t>(out, 2, 0x0101);
  Put<uint32_t>(out, 4, 80);
  Put<uint64_t>(out, 8, padded);
  if (e.compression != Compression::kNone) {
    Put<uint32_t>(out, 0x10, static_cast<uint32_t>(stored.size()));
    Put<uint64_t>(out, 0x38, e.payload.size());
  }
  Put<uint32_t>(out, 0x1c, e.arch);
  Put<uint64_t>(out, 0x28, flags);
  Put<uint32_t>(out, 0x40, 0x48);
  Put<uint32_t>(out, 0x44, static_cast<uint32_t>(e.options.size()));
  std::memcpy(out.data() + 0x48, e.options.data(), std::min<size_t>(e.options.size(), 8));
  out += stored;
  out.resize(80 + padded, '\0');
  return out;
}

inline std::string FatbinBytes(const std::vector<HandEntry>& entries) {
  std::string data;
  for (const HandEntry& e : entries) data += EntryBytes(e);
  std::string out(16, '\0');
  Put<uint32_t>(out, 0, kFatbinMagic);
  Put<uint16_t>(out, 4, 1);
  Put<uint16_t>(out, 6, 16);
  Put<uint64_t>(out, 8, data.size());
  return out + data;
}

}  // namespace kcache::fatbin::testing

#endif  // KCACHE_TESTS_TESTUTIL_FATBIN_BYTES_H_
