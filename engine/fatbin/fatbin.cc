// ParseFatbins and EntryPayload (fatbin.h): the fatbin container, bounds-checked, and its
// payloads decompressed with liblz4 and libzstd.
#include "engine/fatbin/fatbin.h"

#include <lz4.h>
#include <zstd.h>

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kcache::fatbin {
namespace {

template <typename T>
T Load(absl::string_view bytes, size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;  // little-endian hosts only (x86-64, aarch64), as CUDA itself
}

std::string SizeText(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return absl::StrCat(bytes >> 30, " GiB");
  if (bytes >= (uint64_t{1} << 20)) return absl::StrCat(bytes >> 20, " MiB");
  if (bytes >= (uint64_t{1} << 10)) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrCat(bytes, " B");
}

// Reads the entries of the fatbin at bytes[at..], whose data may run to bytes.size(). Returns
// where the fatbin ends.
absl::StatusOr<size_t> ParseOne(absl::string_view bytes, size_t at, absl::string_view file,
                                uint64_t base, const FatbinLimits& limits,
                                std::vector<FatbinEntry>* out) {
  const size_t fatbin = out->empty() ? 0 : out->back().fatbin + 1;
  auto where = [&](uint64_t offset) {
    return absl::StrCat(file, ": fatbin at offset ", base + at,
                        offset == base + at ? "" : absl::StrCat(", entry at offset ", offset),
                        ": ");
  };
  if (bytes.size() - at < kFatbinHeaderSize) {
    return absl::DataLossError(absl::StrCat(where(base + at), "truncated: ", bytes.size() - at,
                                            " bytes left, the header takes ", kFatbinHeaderSize));
  }
  uint32_t magic = Load<uint32_t>(bytes, at);
  if (magic != kFatbinMagic) {
    return absl::InvalidArgumentError(absl::StrCat(where(base + at), "no fatbin magic (0x",
                                                   absl::Hex(magic, absl::kZeroPad8),
                                                   " where 0xba55ed50 must be)"));
  }
  uint16_t version = Load<uint16_t>(bytes, at + 4);
  uint16_t header_size = Load<uint16_t>(bytes, at + 6);
  uint64_t data_size = Load<uint64_t>(bytes, at + 8);
  if (version != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(base + at), "fatbin version ", version, "; this reader knows 1"));
  }
  if (header_size < kFatbinHeaderSize || header_size > bytes.size() - at) {
    return absl::DataLossError(absl::StrCat(where(base + at), "header size ", header_size,
                                            " is below ", kFatbinHeaderSize,
                                            " or past the end of the input"));
  }
  size_t begin = at + header_size;
  if (data_size > bytes.size() - begin) {
    return absl::DataLossError(absl::StrCat(where(base + at), "declares ", data_size,
                                            " bytes of entries but only ", bytes.size() - begin,
                                            " follow (truncated?)"));
  }
  size_t end = begin + data_size;
  size_t e = begin;
  while (e < end) {
    uint64_t entry_offset = base + e;
    if (end - e < kMinEntryHeaderSize) {
      return absl::DataLossError(absl::StrCat(where(entry_offset), end - e,
                                              " bytes left in the fatbin, too few for an entry "
                                              "header (",
                                              kMinEntryHeaderSize, ")"));
    }
    uint32_t entry_header = Load<uint32_t>(bytes, e + 4);
    uint64_t stored_size = Load<uint64_t>(bytes, e + 8);
    if (entry_header < kMinEntryHeaderSize || entry_header > end - e) {
      return absl::DataLossError(absl::StrCat(where(entry_offset), "entry header size ",
                                              entry_header, " is below ", kMinEntryHeaderSize,
                                              " or past the end of the fatbin"));
    }
    if (stored_size > end - e - entry_header) {
      return absl::DataLossError(absl::StrCat(where(entry_offset), "payload of ", stored_size,
                                              " bytes runs past the end of the fatbin (",
                                              end - e - entry_header, " bytes left)"));
    }
    FatbinEntry entry;
    entry.raw_kind = Load<uint16_t>(bytes, e);
    entry.kind = entry.raw_kind == 1   ? EntryKind::kPtx
                 : entry.raw_kind == 2 ? EntryKind::kSass
                 : entry.raw_kind == 8 ? EntryKind::kLtoir
                                       : EntryKind::kOther;
    entry.arch = static_cast<int>(Load<uint32_t>(bytes, e + 0x1c));
    entry.flags = Load<uint64_t>(bytes, e + 0x28);
    entry.offset = entry_offset;
    entry.variant = (entry.flags & kFlagArchSpecific) ? ArchVariant::kArchSpecific
                    : (entry.flags & kFlagFamily)     ? ArchVariant::kFamily
                                                      : ArchVariant::kNone;
    bool lz4 = (entry.flags & kFlagLz4) != 0;
    bool zstd = (entry.flags & kFlagZstd) != 0;
    if (lz4 && zstd) {
      return absl::InvalidArgumentError(absl::StrCat(where(entry_offset), "flags 0x",
                                                     absl::Hex(entry.flags),
                                                     " claim both LZ4 and zstd compression"));
    }
    const char* payload = bytes.data() + e + entry_header;
    if (lz4 || zstd) {
      entry.compression = lz4 ? Compression::kLz4 : Compression::kZstd;
      uint32_t compressed = Load<uint32_t>(bytes, e + 0x10);
      if (compressed == 0 || compressed > stored_size) {
        return absl::DataLossError(absl::StrCat(where(entry_offset), "compressed size ", compressed,
                                                " is 0 or more than the ", stored_size,
                                                " bytes stored"));
      }
      entry.stored = absl::string_view(payload, compressed);
      entry.payload_size = Load<uint64_t>(bytes, e + 0x38);
    } else {
      entry.stored = absl::string_view(payload, stored_size);
      entry.payload_size = stored_size;
    }
    if (entry.payload_size > limits.max_payload_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(entry_offset), "payload declares ", entry.payload_size, " bytes (",
                       SizeText(entry.payload_size), "), more than the limit of ",
                       SizeText(limits.max_payload_bytes)));
    }
    // The options text: a u32 offset (from the entry header) and a u32 length, inside the header.
    if (entry_header >= 0x48) {
      uint32_t options_at = Load<uint32_t>(bytes, e + 0x40);
      uint32_t options_len = Load<uint32_t>(bytes, e + 0x44);
      if (options_len > 0) {
        if (options_at > entry_header || options_len > entry_header - options_at) {
          return absl::DataLossError(absl::StrCat(where(entry_offset), "options text (",
                                                  options_len, " bytes at ", options_at,
                                                  ") lies outside the entry header"));
        }
        absl::string_view text(bytes.data() + e + options_at, options_len);
        entry.jit_options = std::string(text.substr(0, text.find('\0')));
      }
    }
    entry.fatbin = fatbin;
    out->push_back(std::move(entry));
    e += entry_header + stored_size;
  }
  return end;
}

}  // namespace

absl::string_view EntryKindName(EntryKind kind) {
  switch (kind) {
    case EntryKind::kPtx:
      return "PTX";
    case EntryKind::kSass:
      return "SASS";
    case EntryKind::kLtoir:
      return "LTO-IR";
    case EntryKind::kOther:
      break;
  }
  return "other";
}

absl::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kLz4:
      return "lz4";
    case Compression::kZstd:
      return "zstd";
    case Compression::kNone:
      break;
  }
  return "none";
}

Target FatbinEntry::target() const {
  return Target{kind == EntryKind::kSass ? TargetKind::kSass : TargetKind::kPtx, SmFromArch(arch),
                variant};
}

std::string FatbinEntry::Describe() const {
  std::string what = kind == EntryKind::kOther ? absl::StrCat("kind ", raw_kind, " arch ", arch)
                                               : target().ToString();
  return absl::StrCat(
      EntryKindName(kind), " ", what, " (",
      compression == Compression::kNone ? "" : absl::StrCat(CompressionName(compression), ", "),
      SizeText(payload_size), relocatable ? ", relocatable" : "", ")");
}

absl::Status ParseFatbins(absl::string_view bytes, bool sequence, absl::string_view file,
                          uint64_t base, const FatbinLimits& limits,
                          std::vector<FatbinEntry>* out) {
  if (!sequence) return ParseOne(bytes, 0, file, base, limits, out).status();
  size_t at = 0;
  while (at < bytes.size()) {
    // Zero padding between fatbins (each starts 8-aligned).
    if (bytes.size() - at < kFatbinHeaderSize ||
        (Load<uint32_t>(bytes, at) == 0 && bytes.size() - at >= 8 &&
         Load<uint64_t>(bytes, at) == 0)) {
      absl::string_view rest = bytes.substr(at, std::min<size_t>(8, bytes.size() - at));
      if (rest.find_first_not_of('\0') != absl::string_view::npos) {
        return absl::DataLossError(absl::StrCat(file, ": ", bytes.size() - at, " bytes at offset ",
                                                base + at, " are neither a fatbin nor padding"));
      }
      at += rest.size();
      continue;
    }
    absl::StatusOr<size_t> end = ParseOne(bytes, at, file, base, limits, out);
    if (!end.ok()) return end.status();
    at = (*end + 7) & ~size_t{7};
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EntryPayload(const FatbinEntry& entry, absl::string_view file,
                                         const FatbinLimits& limits) {
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(file, ": entry at offset ", entry.offset, " (",
                                            entry.Describe(), "): ", what));
  };
  if (entry.payload_size > limits.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": entry at offset ", entry.offset, " declares ", SizeText(entry.payload_size),
        ", more than the limit of ", SizeText(limits.max_payload_bytes)));
  }
  std::string payload;
  switch (entry.compression) {
    case Compression::kNone:
      payload.assign(entry.stored.data(), entry.stored.size());
      break;
    case Compression::kLz4: {
      if (entry.payload_size > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
          entry.stored.size() > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
        return bad("too large for one LZ4 block");
      }
      payload.resize(entry.payload_size);
      int n = LZ4_decompress_safe(entry.stored.data(), payload.data(),
                                  static_cast<int>(entry.stored.size()),
                                  static_cast<int>(payload.size()));
      if (n < 0) return bad("the LZ4 block does not decompress");
      if (static_cast<uint64_t>(n) != entry.payload_size) {
        return bad(
            absl::StrCat("LZ4 gave ", n, " bytes, the header declares ", entry.payload_size));
      }
      break;
    }
    case Compression::kZstd: {
      unsigned long long frame = ZSTD_getFrameContentSize(entry.stored.data(), entry.stored.size());
      if (frame == ZSTD_CONTENTSIZE_ERROR) return bad("the payload is not a zstd frame");
      if (frame != ZSTD_CONTENTSIZE_UNKNOWN && frame != entry.payload_size) {
        return bad(absl::StrCat("the zstd frame holds ", frame, " bytes, the header declares ",
                                entry.payload_size));
      }
      payload.resize(entry.payload_size);
      size_t n =
          ZSTD_decompress(payload.data(), payload.size(), entry.stored.data(), entry.stored.size());
      if (ZSTD_isError(n)) {
        return bad(absl::StrCat("the zstd frame does not decompress: ", ZSTD_getErrorName(n)));
      }
      if (n != entry.payload_size) {
        return bad(
            absl::StrCat("zstd gave ", n, " bytes, the header declares ", entry.payload_size));
      }
      break;
    }
  }
  if (entry.kind == EntryKind::kPtx) payload.resize(std::min(payload.size(), payload.find('\0')));
  return payload;
}

}  // namespace kcache::fatbin
