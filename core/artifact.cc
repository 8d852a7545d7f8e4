#include "core/artifact.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/coding.h"

namespace kcache {
namespace {

// Longest target or toolkit string a key can hold (its length is one byte).
constexpr size_t kMaxKeyStringSize = 255;

void AppendShortString(std::string& out, absl::string_view text) {
  text = text.substr(0, std::min(text.size(), kMaxKeyStringSize));
  out.push_back(static_cast<char>(text.size()));
  absl::StrAppend(&out, text);
}

// Reads "u8 length + bytes" from the front of `in`; false when `in` is too short.
bool ConsumeShortString(absl::string_view& in, absl::string_view* text) {
  if (in.empty()) return false;
  size_t size = static_cast<uint8_t>(in.front());
  if (in.size() < 1 + size) return false;
  *text = in.substr(1, size);
  in.remove_prefix(1 + size);
  return true;
}

absl::Status BadKey(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("artifact key is malformed (", why,
                   "); the store entry is damaged or was not written by kcache"));
}

// Reads "u8 len + toolkit id | u32be driver", the end of every key, into `key`.
absl::StatusOr<ArtifactKey> DecodeKeyTail(absl::string_view encoded, ArtifactKey key) {
  absl::string_view toolkit;
  if (!ConsumeShortString(encoded, &toolkit)) return BadKey("truncated toolkit id");
  key.toolkit = std::string(toolkit);
  if (encoded.size() != 4) {
    return BadKey(absl::StrCat("expected 4 driver bytes at the end, found ", encoded.size()));
  }
  key.driver = DecodeBigEndian32(encoded.data());
  return key;
}

}  // namespace

absl::string_view ArtifactKindName(ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::kCubin:
      return "cubin";
    case ArtifactKind::kPtx:
      return "ptx";
    case ArtifactKind::kLtoir:
      return "ltoir";
    case ArtifactKind::kObject:
      return "object";
  }
  return "unknown";
}

absl::StatusOr<ArtifactKind> ParseArtifactKind(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  for (ArtifactKind kind : {ArtifactKind::kCubin, ArtifactKind::kPtx, ArtifactKind::kLtoir}) {
    if (lower == ArtifactKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown artifact kind '", name, "'; expected cubin, ptx or ltoir"));
}

std::string ArtifactKey::Encode() const {
  std::string target_text = kind == ArtifactKind::kObject ? "" : target.ToString();
  std::string out;
  out.reserve(KernelId::kSize + 1 + 1 + target_text.size() + 1 + toolkit.size() + 4);
  absl::StrAppend(&out, kernel_id.Bytes());
  out.push_back(static_cast<char>(kind));
  AppendShortString(out, target_text);
  AppendShortString(out, toolkit);
  PutBigEndian32(out, driver);  // keys sort by driver
  return out;
}

absl::StatusOr<ArtifactKey> ArtifactKey::Decode(absl::string_view encoded) {
  if (encoded.size() < KernelId::kSize + 1) return BadKey("shorter than a kernel id and kind");
  ArtifactKey key;
  absl::StatusOr<KernelId> id = KernelId::FromBytes(encoded.substr(0, KernelId::kSize));
  if (!id.ok()) return BadKey(id.status().message());
  key.kernel_id = *id;
  encoded.remove_prefix(KernelId::kSize);

  uint8_t kind = static_cast<uint8_t>(encoded.front());
  encoded.remove_prefix(1);
  if (kind < static_cast<uint8_t>(ArtifactKind::kCubin) ||
      kind > static_cast<uint8_t>(ArtifactKind::kObject)) {
    return BadKey(absl::StrCat("unknown kind byte ", kind));
  }
  key.kind = static_cast<ArtifactKind>(kind);

  absl::string_view target_text;
  if (!ConsumeShortString(encoded, &target_text)) return BadKey("truncated target");
  if (key.kind == ArtifactKind::kObject) {
    if (!target_text.empty()) return BadKey("an object key carries a target");
    return DecodeKeyTail(encoded, key);
  }
  absl::StatusOr<Target> target = ParseTarget(target_text);
  if (!target.ok()) return BadKey(target.status().message());
  if (target->ToString() != target_text) {
    return BadKey(absl::StrCat("target '", target_text, "' is not in canonical form"));
  }
  key.target = *target;
  return DecodeKeyTail(encoded, key);
}

std::string ArtifactKey::ToString() const {
  if (kind == ArtifactKind::kObject) {
    return absl::StrCat(kernel_id.ShortHex(), "/object/", toolkit.substr(0, 12));
  }
  std::string out = absl::StrCat(kernel_id.ShortHex(), "/", ArtifactKindName(kind), "/",
                                 target.ToString(), "/", toolkit);
  if (driver != 0) absl::StrAppend(&out, "/driver=", driver);
  return out;
}

uint64_t PayloadChecksum(absl::string_view data) { return XXH3_64bits(data.data(), data.size()); }

std::string KeyWithChecksum(const ArtifactMeta& meta) {
  return absl::StrCat(meta.key.Encode(), "/", meta.checksum);
}

std::string DriverText(uint32_t driver) {
  if (driver == 0) return "unknown";
  return absl::StrCat(driver / 1000, ".", (driver % 1000) / 10);
}

uint32_t MinDriverFor(ArtifactKind kind, int toolkit_major, int toolkit_minor) {
  uint32_t major = static_cast<uint32_t>(toolkit_major) * 1000;
  return kind == ArtifactKind::kPtx ? major + static_cast<uint32_t>(toolkit_minor) * 10 : major;
}

int64_t NowUnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kcache
