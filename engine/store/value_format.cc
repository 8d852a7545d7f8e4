#include "engine/store/value_format.h"

#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/coding.h"

namespace kcache {
namespace {

// Fixed header layout (docs/store-format.md, "Values").
constexpr char kMagic[4] = {'K', 'C', 'S', 'V'};
constexpr size_t kMetaSumOffset = 4;      // u64le XXH3-64 of bytes [20, 44 + meta_len)
constexpr size_t kPayloadSumOffset = 12;  // u64le XXH3-64 of the stored payload
constexpr size_t kCoveredOffset = 20;     // first byte covered by the metadata checksum
constexpr size_t kVersionOffset = 20;
constexpr size_t kTypeOffset = 21;
constexpr size_t kCodecOffset = 22;
constexpr size_t kFlagsOffset = 23;
constexpr size_t kMetaLenOffset = 24;     // u32le
constexpr size_t kPayloadLenOffset = 28;  // u64le, bytes as stored
constexpr size_t kRawLenOffset = 36;      // u64le, bytes after decompression
static_assert(kRawLenOffset + 8 == kValueHeaderSize);

constexpr uint64_t kMaxRawSize = uint64_t{1} << 32;  // sanity bound for one payload
// A zstd block decodes to at most 128 KiB and takes at least 4 bytes (a 3-byte header and one
// byte), so a zstd payload of n bytes decodes to at most (n / 4 + 1) * 128 KiB.
constexpr uint64_t kZstdBlockMax = uint64_t{128} << 10;

enum class Codec : uint8_t { kRaw = 0, kZstd = 1 };

// Metadata tags. Numbers are stable; unknown tags are skipped by readers.
enum ArtifactTag : uint8_t {
  kTagKey = 1,
  kTagKernelName = 2,
  kTagLoweredName = 3,
  kTagCompileLog = 4,
  kTagCompileMicros = 5,
  kTagSize = 6,
  kTagChecksum = 7,
  kTagCreated = 8,
  kTagLastUsed = 9,
  kTagMinDriver = 10,
  kTagPutBy = 11,
};
enum KernelTag : uint8_t {
  kTagKernelId = 1,
  kTagName = 2,
  kTagOption = 3,
  kTagNameExpression = 4,
  kTagMinArch = 5,
  kTagMaxArch = 6,
  kTagWantLtoir = 7,
  kTagSourceName = 8,
};
enum KernelPayloadTag : uint8_t { kTagSource = 1, kTagHeader = 2 };

absl::Status Corrupt(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("store value is corrupt: ", why));
}

// field := u8 tag | u32le length | bytes
class FieldWriter {
 public:
  void Bytes(uint8_t tag, absl::string_view value) {
    out_.push_back(static_cast<char>(tag));
    PutFixed32(out_, static_cast<uint32_t>(value.size()));
    absl::StrAppend(&out_, value);
  }
  void U64(uint8_t tag, uint64_t value) {
    std::string bytes;
    PutFixed64(bytes, value);
    Bytes(tag, bytes);
  }
  // A pair: u32le length of `first`, `first`, then `second` to the end of the field.
  void Pair(uint8_t tag, absl::string_view first, absl::string_view second) {
    std::string bytes;
    PutFixed32(bytes, static_cast<uint32_t>(first.size()));
    absl::StrAppend(&bytes, first);
    absl::StrAppend(&bytes, second);
    Bytes(tag, bytes);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class FieldReader {
 public:
  explicit FieldReader(absl::string_view in) : in_(in) {}
  // Next field; false at the end or on truncation (then ok() is false).
  bool Next(uint8_t* tag, absl::string_view* value) {
    if (in_.empty()) return false;
    if (in_.size() < 5 || in_.size() - 5 < DecodeFixed32(in_.data() + 1)) {
      ok_ = false;
      return false;
    }
    *tag = static_cast<uint8_t>(in_[0]);
    size_t size = DecodeFixed32(in_.data() + 1);
    *value = in_.substr(5, size);
    in_.remove_prefix(5 + size);
    return true;
  }
  bool ok() const { return ok_; }

 private:
  absl::string_view in_;
  bool ok_ = true;
};

bool ReadU64(absl::string_view field, uint64_t* out) {
  if (field.size() != 8) return false;
  *out = DecodeFixed64(field.data());
  return true;
}

bool ReadPair(absl::string_view field, std::string* first, std::string* second) {
  if (field.size() < 4 || field.size() - 4 < DecodeFixed32(field.data())) return false;
  size_t size = DecodeFixed32(field.data());
  *first = std::string(field.substr(4, size));
  *second = std::string(field.substr(4 + size));
  return true;
}

struct ZstdContexts {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx{ZSTD_createCCtx(), ZSTD_freeCCtx};
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx{ZSTD_createDCtx(), ZSTD_freeDCtx};
};
ZstdContexts& ThreadZstd() {
  thread_local ZstdContexts contexts;
  return contexts;
}

// The zstd form of `raw` when zstd_level > 0 and it saves at least 1/8 of it; null otherwise.
// The buffer is allocated uninitialized, so its pages past what zstd writes are never touched
// (a std::string would zero all ZSTD_compressBound bytes first).
std::unique_ptr<char[]> Compressed(absl::string_view raw, int zstd_level, size_t* size) {
  if (zstd_level <= 0 || raw.size() < 64) return nullptr;
  size_t bound = ZSTD_compressBound(raw.size());
  std::unique_ptr<char[]> out(new char[bound]);
  size_t n = ZSTD_compressCCtx(ThreadZstd().cctx.get(), out.get(), bound, raw.data(), raw.size(),
                               zstd_level);
  if (ZSTD_isError(n) || n > raw.size() - raw.size() / 8) return nullptr;
  *size = n;
  return out;
}

// The fixed header and the metadata block of a value whose stored payload is `payload`.
std::string FrameHead(ValueType type, absl::string_view meta, uint64_t raw_size, Codec codec,
                      absl::string_view payload) {
  std::string out(kMagic, sizeof(kMagic));
  out.reserve(kValueHeaderSize + meta.size());
  PutFixed64(out, 0);  // metadata checksum, filled in below
  PutFixed64(out, XXH3_64bits(payload.data(), payload.size()));
  out.push_back(static_cast<char>(kValueFormatVersion));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(codec));
  out.push_back(0);  // flags
  PutFixed32(out, static_cast<uint32_t>(meta.size()));
  PutFixed64(out, payload.size());
  PutFixed64(out, raw_size);
  absl::StrAppend(&out, meta);
  EncodeFixed64(out.data() + kMetaSumOffset,
                XXH3_64bits(out.data() + kCoveredOffset, out.size() - kCoveredOffset));
  return out;
}

ValueParts FrameParts(ValueType type, absl::string_view meta, absl::string_view raw,
                      int zstd_level) {
  ValueParts parts;
  size_t compressed_size = 0;
  parts.compressed = Compressed(raw, zstd_level, &compressed_size);
  Codec codec = parts.compressed != nullptr ? Codec::kZstd : Codec::kRaw;
  parts.payload =
      codec == Codec::kZstd ? absl::string_view(parts.compressed.get(), compressed_size) : raw;
  parts.head = FrameHead(type, meta, raw.size(), codec, parts.payload);
  return parts;
}

std::string Frame(ValueType type, absl::string_view meta, absl::string_view raw, int zstd_level) {
  ValueParts parts = FrameParts(type, meta, raw, zstd_level);
  std::string out;
  out.reserve(parts.head.size() + parts.payload.size());
  absl::StrAppend(&out, parts.head, parts.payload);
  return out;
}

struct Unframed {
  absl::string_view meta;
  absl::string_view payload;  // as stored
  Codec codec = Codec::kRaw;
  uint64_t raw_size = 0;
  uint64_t payload_sum = 0;
};

absl::StatusOr<Unframed> Unframe(absl::string_view value, ValueType expected) {
  if (value.size() < kValueHeaderSize) {
    return Corrupt(absl::StrCat(value.size(), " bytes is shorter than the value header"));
  }
  if (std::memcmp(value.data(), kMagic, sizeof(kMagic)) != 0) return Corrupt("bad magic");
  const char* p = value.data();
  if (static_cast<uint8_t>(p[kVersionOffset]) != kValueFormatVersion) {
    return Corrupt(absl::StrCat("value format ", static_cast<uint8_t>(p[kVersionOffset]),
                                " is not the one this kcache reads (",
                                static_cast<int>(kValueFormatVersion), ")"));
  }
  uint64_t meta_size = DecodeFixed32(p + kMetaLenOffset);
  uint64_t payload_size = DecodeFixed64(p + kPayloadLenOffset);
  uint64_t body = value.size() - kValueHeaderSize;
  if (meta_size > body || payload_size != body - meta_size) {
    return Corrupt(absl::StrCat("lengths (", meta_size, " + ", payload_size,
                                ") do not match the value size ", value.size()));
  }
  uint64_t covered = kValueHeaderSize - kCoveredOffset + meta_size;
  if (XXH3_64bits(p + kCoveredOffset, covered) != DecodeFixed64(p + kMetaSumOffset)) {
    return Corrupt("metadata checksum mismatch");
  }
  Unframed out;
  out.meta = value.substr(kValueHeaderSize, meta_size);
  out.payload = value.substr(kValueHeaderSize + meta_size);
  out.payload_sum = XXH3_64bits(out.payload.data(), out.payload.size());
  if (out.payload_sum != DecodeFixed64(p + kPayloadSumOffset)) {
    return Corrupt("payload checksum mismatch");
  }
  if (static_cast<uint8_t>(p[kTypeOffset]) != static_cast<uint8_t>(expected)) {
    return Corrupt(absl::StrCat("value type ", static_cast<uint8_t>(p[kTypeOffset]), " where type ",
                                static_cast<int>(expected), " was expected"));
  }
  uint8_t codec = static_cast<uint8_t>(p[kCodecOffset]);
  if (codec > static_cast<uint8_t>(Codec::kZstd) || p[kFlagsOffset] != 0) {
    return Corrupt("unknown codec or flags");
  }
  out.codec = static_cast<Codec>(codec);
  out.raw_size = DecodeFixed64(p + kRawLenOffset);
  if (out.raw_size > kMaxRawSize ||
      (out.codec == Codec::kRaw && out.raw_size != out.payload.size())) {
    return Corrupt("bad payload size");
  }
  // Checked before the decoder allocates raw_size bytes for it.
  if (out.codec == Codec::kZstd && out.raw_size > (out.payload.size() / 4 + 1) * kZstdBlockMax) {
    return Corrupt(absl::StrCat(out.payload.size(), " bytes of zstd cannot decompress to the ",
                                out.raw_size, " bytes the header says"));
  }
  return out;
}

absl::StatusOr<std::string> RawPayload(const Unframed& unframed) {
  if (unframed.codec == Codec::kRaw) return std::string(unframed.payload);
  std::string out(unframed.raw_size, '\0');
  size_t n = ZSTD_decompressDCtx(ThreadZstd().dctx.get(), out.data(), out.size(),
                                 unframed.payload.data(), unframed.payload.size());
  if (ZSTD_isError(n)) return Corrupt(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
  if (n != unframed.raw_size) return Corrupt("decompressed size differs from the header");
  return out;
}

std::string ArtifactMetaBlock(const ArtifactMeta& meta) {
  FieldWriter w;
  w.Bytes(kTagKey, meta.key.Encode());
  w.Bytes(kTagKernelName, meta.kernel_name);
  for (const auto& [expression, lowered] : meta.lowered_names) {
    w.Pair(kTagLoweredName, expression, lowered);
  }
  w.Bytes(kTagCompileLog, meta.compile_log);
  w.U64(kTagCompileMicros, meta.compile_micros);
  w.U64(kTagSize, meta.size);
  w.U64(kTagChecksum, meta.checksum);
  w.U64(kTagCreated, static_cast<uint64_t>(meta.created_unix_ms));
  w.U64(kTagLastUsed, static_cast<uint64_t>(meta.last_used_unix_ms));
  w.U64(kTagMinDriver, meta.min_driver);
  if (!meta.put_by.empty()) w.Bytes(kTagPutBy, meta.put_by);
  return std::move(w.out());
}

absl::StatusOr<ArtifactMeta> ParseArtifactMetaBlock(absl::string_view block) {
  ArtifactMeta meta;
  bool has_key = false, has_size = false, has_checksum = false, ok = true;
  FieldReader reader(block);
  uint8_t tag = 0;
  absl::string_view field;
  uint64_t n = 0;
  while (ok && reader.Next(&tag, &field)) {
    switch (tag) {
      case kTagKey: {
        absl::StatusOr<ArtifactKey> key = ArtifactKey::Decode(field);
        if (!key.ok()) return Corrupt(key.status().message());
        meta.key = *std::move(key);
        has_key = true;
        break;
      }
      case kTagKernelName:
        meta.kernel_name = std::string(field);
        break;
      case kTagLoweredName: {
        auto& pair = meta.lowered_names.emplace_back();
        ok = ReadPair(field, &pair.first, &pair.second);
        break;
      }
      case kTagCompileLog:
        meta.compile_log = std::string(field);
        break;
      case kTagCompileMicros:
        ok = ReadU64(field, &meta.compile_micros);
        break;
      case kTagSize:
        ok = has_size = ReadU64(field, &meta.size);
        break;
      case kTagChecksum:
        ok = has_checksum = ReadU64(field, &meta.checksum);
        break;
      case kTagCreated:
        ok = ReadU64(field, &n);
        meta.created_unix_ms = static_cast<int64_t>(n);
        break;
      case kTagLastUsed:
        ok = ReadU64(field, &n);
        meta.last_used_unix_ms = static_cast<int64_t>(n);
        break;
      case kTagMinDriver:
        ok = ReadU64(field, &n) && n <= UINT32_MAX;
        meta.min_driver = static_cast<uint32_t>(n);
        break;
      case kTagPutBy:
        meta.put_by = std::string(field);
        break;
      default:
        break;  // a field added later: skipped
    }
  }
  if (!ok || !reader.ok()) return Corrupt(absl::StrCat("bad artifact metadata field ", tag));
  if (!has_key || !has_size || !has_checksum) return Corrupt("artifact metadata incomplete");
  return meta;
}

}  // namespace

std::string EncodeArtifactValue(const ArtifactMeta& meta, absl::string_view bytes, int zstd_level) {
  return Frame(ValueType::kArtifact, ArtifactMetaBlock(meta), bytes, zstd_level);
}

ValueParts EncodeArtifactValueParts(const ArtifactMeta& meta, absl::string_view bytes,
                                    int zstd_level) {
  return FrameParts(ValueType::kArtifact, ArtifactMetaBlock(meta), bytes, zstd_level);
}

absl::StatusOr<Artifact> DecodeArtifactValue(absl::string_view value) {
  absl::StatusOr<Unframed> unframed = Unframe(value, ValueType::kArtifact);
  if (!unframed.ok()) return unframed.status();
  absl::StatusOr<ArtifactMeta> meta = ParseArtifactMetaBlock(unframed->meta);
  if (!meta.ok()) return meta.status();
  if (meta->size != unframed->raw_size) return Corrupt("payload size differs from metadata");
  // A raw payload was just verified against its checksum; a decompressed one is checked
  // end to end against the checksum taken before compression.
  if (unframed->codec == Codec::kRaw && unframed->payload_sum != meta->checksum) {
    return Corrupt("payload checksum differs from metadata");
  }
  absl::StatusOr<std::string> bytes = RawPayload(*unframed);
  if (!bytes.ok()) return bytes.status();
  if (unframed->codec != Codec::kRaw && PayloadChecksum(*bytes) != meta->checksum) {
    return Corrupt("decompressed payload checksum mismatch");
  }
  return Artifact{*std::move(meta), *std::move(bytes)};
}

std::string EncodeArtifactMetaValue(const ArtifactMeta& meta) {
  return Frame(ValueType::kArtifactMeta, ArtifactMetaBlock(meta), {}, 0);
}

absl::StatusOr<ArtifactMeta> DecodeArtifactMetaValue(absl::string_view value) {
  absl::StatusOr<Unframed> unframed = Unframe(value, ValueType::kArtifactMeta);
  if (!unframed.ok()) return unframed.status();
  if (unframed->raw_size != 0) return Corrupt("metadata value carries a payload");
  return ParseArtifactMetaBlock(unframed->meta);
}

std::string EncodeKernelValue(const KernelRecord& record, int zstd_level) {
  FieldWriter meta;
  meta.Bytes(kTagKernelId, record.id.Bytes());
  meta.Bytes(kTagName, record.spec.name);
  if (!record.spec.source_name.empty()) meta.Bytes(kTagSourceName, record.spec.source_name);
  for (const std::string& option : record.spec.options) meta.Bytes(kTagOption, option);
  for (const std::string& expression : record.spec.name_expressions) {
    meta.Bytes(kTagNameExpression, expression);
  }
  meta.U64(kTagMinArch, static_cast<uint64_t>(static_cast<int64_t>(record.arch.min_arch)));
  meta.U64(kTagMaxArch, static_cast<uint64_t>(static_cast<int64_t>(record.arch.max_arch)));
  meta.U64(kTagWantLtoir, record.want_ltoir ? 1 : 0);
  FieldWriter payload;
  payload.Bytes(kTagSource, record.spec.source);
  for (const auto& [name, content] : record.spec.headers) {
    payload.Pair(kTagHeader, name, content);
  }
  return Frame(ValueType::kKernel, meta.out(), payload.out(), zstd_level);
}

absl::StatusOr<KernelRecord> DecodeKernelValue(absl::string_view value) {
  absl::StatusOr<Unframed> unframed = Unframe(value, ValueType::kKernel);
  if (!unframed.ok()) return unframed.status();
  KernelRecord record;
  bool has_id = false, ok = true;
  uint8_t tag = 0;
  absl::string_view field;
  uint64_t n = 0;
  FieldReader meta(unframed->meta);
  while (ok && meta.Next(&tag, &field)) {
    switch (tag) {
      case kTagKernelId: {
        absl::StatusOr<KernelId> id = KernelId::FromBytes(field);
        ok = has_id = id.ok();
        if (ok) record.id = *id;
        break;
      }
      case kTagName:
        record.spec.name = std::string(field);
        break;
      case kTagSourceName:
        record.spec.source_name = std::string(field);
        break;
      case kTagOption:
        record.spec.options.emplace_back(field);
        break;
      case kTagNameExpression:
        record.spec.name_expressions.emplace_back(field);
        break;
      case kTagMinArch:
        ok = ReadU64(field, &n);
        record.arch.min_arch = static_cast<int>(static_cast<int64_t>(n));
        break;
      case kTagMaxArch:
        ok = ReadU64(field, &n);
        record.arch.max_arch = static_cast<int>(static_cast<int64_t>(n));
        break;
      case kTagWantLtoir:
        ok = ReadU64(field, &n) && n <= 1;
        record.want_ltoir = n == 1;
        break;
      default:
        break;
    }
  }
  if (!ok || !meta.ok() || !has_id) return Corrupt("bad kernel record metadata");
  absl::StatusOr<std::string> raw = RawPayload(*unframed);
  if (!raw.ok()) return raw.status();
  FieldReader payload(*raw);
  while (ok && payload.Next(&tag, &field)) {
    if (tag == kTagSource) {
      record.spec.source = std::string(field);
    } else if (tag == kTagHeader) {
      std::string name, content;
      ok = ReadPair(field, &name, &content);
      record.spec.headers[std::move(name)] = std::move(content);
    }
  }
  if (!ok || !payload.ok()) return Corrupt("bad kernel record payload");
  return record;
}

std::string EncodeFormatVersion(uint32_t version) { return absl::StrCat(version); }

absl::StatusOr<uint32_t> DecodeFormatVersion(absl::string_view value) {
  uint32_t version = 0;
  if (!absl::SimpleAtoi(value, &version) || version == 0) {
    return absl::DataLossError(
        absl::StrCat("store format version '", value, "' is not a positive number"));
  }
  return version;
}

}  // namespace kcache
