#include "core/kernel_spec.h"

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/coding.h"
#include "core/sha256.h"
#include "core/xxh128.h"

namespace kcache {
namespace {

constexpr char kFramingMagic[] = "kcache.kernel";  // written with its terminating NUL

// The canonical framing of `spec` (CanonicalKernelFraming's contract), handed to `put` a piece
// at a time: one definition for the test vectors' bytes and for the digest, which hashes the
// pieces without copying the source into one buffer first.
template <typename Put>
void FrameKernel(const KernelSpec& spec, Put&& put) {
  auto fixed32 = [&](uint32_t v) {
    char out[4];
    EncodeFixed32(out, v);
    put(absl::string_view(out, sizeof(out)));
  };
  auto fixed64 = [&](uint64_t v) {
    char out[8];
    EncodeFixed64(out, v);
    put(absl::string_view(out, sizeof(out)));
  };
  auto tag = [&](char t) { put(absl::string_view(&t, 1)); };
  auto field = [&](absl::string_view bytes) {
    fixed64(bytes.size());
    put(bytes);
  };
  put(absl::string_view(kFramingMagic, sizeof(kFramingMagic)));  // with its NUL
  fixed32(kKernelIdSchemaVersion);
  tag('S');
  field(spec.source);
  for (const auto& [name, content] : spec.headers) {  // std::map: sorted by name
    tag('H');
    field(name);
    field(content);
  }
  for (const auto& option : spec.options) {
    tag('O');
    field(option);
  }
  for (const auto& expression : spec.name_expressions) {
    tag('N');
    field(expression);
  }
  tag('E');
}

}  // namespace

absl::StatusOr<KernelId> KernelId::FromHex(absl::string_view hex) {
  if (hex.size() != 2 * kSize) {
    return absl::InvalidArgumentError(absl::StrCat("kernel id '", hex, "' has ", hex.size(),
                                                   " characters; a kernel id is ", 2 * kSize,
                                                   " hex digits (see `kcache ls`)"));
  }
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("kernel id '", hex, "' is not hexadecimal"));
    }
  }
  return FromBytes(absl::HexStringToBytes(hex));
}

absl::StatusOr<KernelId> KernelId::FromBytes(absl::string_view raw) {
  if (raw.size() != kSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel id must be ", kSize, " bytes, got ", raw.size()));
  }
  std::array<uint8_t, kSize> bytes;
  for (size_t i = 0; i < kSize; ++i) bytes[i] = static_cast<uint8_t>(raw[i]);
  return KernelId(bytes);
}

std::string KernelId::Hex() const { return absl::BytesToHexString(Bytes()); }

std::string KernelId::ShortHex() const { return Hex().substr(0, 12); }

std::string CanonicalKernelFraming(const KernelSpec& spec) {
  std::string out;
  FrameKernel(spec, [&out](absl::string_view piece) { out.append(piece.data(), piece.size()); });
  return out;
}

size_t Utf8ValidPrefix(absl::string_view text) {
  static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};  // by continuation bytes
  size_t i = 0;
  while (i < text.size()) {
    auto lead = static_cast<unsigned char>(text[i]);
    size_t extra = lead < 0x80           ? 0
                   : (lead >> 5) == 0x6  ? 1
                   : (lead >> 4) == 0xe  ? 2
                   : (lead >> 3) == 0x1e ? 3
                                         : 4;  // not a lead byte
    if (extra == 4 || extra >= text.size() - i) return i;
    uint32_t code = extra == 0 ? lead : lead & (0x3f >> extra);
    for (size_t k = 1; k <= extra; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return i;
      code = (code << 6) | (next & 0x3f);
    }
    if (code < kSmallest[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return i;
    }
    i += extra + 1;
  }
  return i;
}

namespace {
std::atomic<uint64_t> kernel_ids_computed{0};
}  // namespace

uint64_t KernelIdsComputed() { return kernel_ids_computed.load(std::memory_order_relaxed); }

KernelId ComputeKernelId(const KernelSpec& spec) {
  kernel_ids_computed.fetch_add(1, std::memory_order_relaxed);
  // Pinned by the test vectors of docs/kernel-id.md.
  Sha256 sha;
  FrameKernel(spec, [&sha](absl::string_view piece) { sha.Update(piece); });
  return KernelId(sha.Finish());
}

KernelFingerprint FingerprintKernel(const KernelSpec& spec) {
  Xxh128 hash;
  FrameKernel(spec, [&hash](absl::string_view piece) { hash.Update(piece); });
  Xxh128Digest digest = hash.Finish();
  return KernelFingerprint{digest.high, digest.low};
}

namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status CheckNoNul(const std::string& text, absl::string_view field) {
  size_t nul = text.find('\0');
  if (nul == std::string::npos) return absl::OkStatus();
  return Invalid(field, absl::StrCat("contains a NUL byte at offset ", nul,
                                     "; NVRTC reads C strings, so send text without NUL bytes"));
}

// The name, source_name, header names, options and name expressions are protobuf strings on
// the wire, which protobuf refuses unless they are UTF-8 (sources and header contents are
// bytes).
absl::Status CheckUtf8(const std::string& text, absl::string_view field) {
  size_t valid = Utf8ValidPrefix(text);
  if (valid == text.size()) return absl::OkStatus();
  return Invalid(field, absl::StrCat("is not UTF-8 (byte 0x",
                                     absl::Hex(static_cast<unsigned char>(text[valid])),
                                     " at offset ", valid, "); write it in UTF-8"));
}

absl::Status CheckShortField(const std::string& text, absl::string_view field) {
  if (text.size() > kMaxShortField) {
    return Invalid(field,
                   absl::StrCat("is ", text.size(), " bytes; the limit is ", kMaxShortField));
  }
  if (absl::Status s = CheckNoNul(text, field); !s.ok()) return s;
  return CheckUtf8(text, field);
}

absl::Status CheckCounts(const KernelSpec& spec, absl::string_view field) {
  if (spec.headers.size() > kMaxSpecHeaders) {
    return Invalid(field, absl::StrCat("has ", spec.headers.size(), " headers; the limit is ",
                                       kMaxSpecHeaders));
  }
  if (spec.options.size() > kMaxSpecOptions) {
    return Invalid(field, absl::StrCat("has ", spec.options.size(), " options; the limit is ",
                                       kMaxSpecOptions));
  }
  if (spec.name_expressions.size() > kMaxNameExpressions) {
    return Invalid(field, absl::StrCat("has ", spec.name_expressions.size(),
                                       " name expressions; the limit is ", kMaxNameExpressions));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSpecLimits(const KernelSpec& spec, absl::string_view field) {
  if (spec.source.empty()) {
    return Invalid(field, "source is empty; send the kernel's CUDA C++ source text");
  }
  if (spec.name.size() > kMaxKernelNameBytes) {
    return Invalid(field, absl::StrCat("name is ", spec.name.size(), " bytes; the limit is ",
                                       kMaxKernelNameBytes));
  }
  if (spec.source_name.size() > kMaxSourceNameBytes) {
    return Invalid(field, absl::StrCat("source_name is ", spec.source_name.size(),
                                       " bytes; the limit is ", kMaxSourceNameBytes));
  }
  if (absl::Status s = CheckNoNul(spec.source_name, absl::StrCat(field, ".source_name")); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckUtf8(spec.name, absl::StrCat(field, ".name")); !s.ok()) return s;
  if (absl::Status s = CheckUtf8(spec.source_name, absl::StrCat(field, ".source_name")); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCounts(spec, field); !s.ok()) return s;
  if (absl::Status s = CheckNoNul(spec.source, absl::StrCat(field, ".source")); !s.ok()) {
    return s;
  }
  size_t bytes = spec.source.size();
  for (const auto& [name, content] : spec.headers) {
    std::string where = absl::StrCat(field, ".headers[", name.empty() ? "\"\"" : name, "]");
    if (name.empty()) {
      return Invalid(where, "has no name; give the name the source #includes, e.g. \"op.cuh\"");
    }
    if (absl::Status s = CheckShortField(name, where + ".name"); !s.ok()) return s;
    if (absl::Status s = CheckNoNul(content, where + ".content"); !s.ok()) return s;
    bytes += name.size() + content.size();
  }
  for (size_t i = 0; i < spec.options.size(); ++i) {
    std::string where = absl::StrCat(field, ".options[", i, "]");
    if (absl::Status s = CheckShortField(spec.options[i], where); !s.ok()) return s;
    bytes += spec.options[i].size();
  }
  for (size_t i = 0; i < spec.name_expressions.size(); ++i) {
    std::string where = absl::StrCat(field, ".name_expressions[", i, "]");
    if (absl::Status s = CheckShortField(spec.name_expressions[i], where); !s.ok()) return s;
    bytes += spec.name_expressions[i].size();
  }
  if (bytes > kMaxSpecBytes) {
    return Invalid(
        field, absl::StrCat("is ", bytes, " bytes of source, headers and options; the limit is ",
                            kMaxSpecBytes, " (3 MiB): split the kernel or trim its headers"));
  }
  return absl::OkStatus();
}

}  // namespace kcache
