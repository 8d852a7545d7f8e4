// The object cache's vocabulary: command keys, entry ids and named values' keys.
#include "core/object_entry.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/coding.h"
#include "core/sha256.h"

namespace kcache {
namespace {

constexpr char kNamedValueDomain[] = "kcache.named-object";

}  // namespace

void AppendKeyFrame(std::string& out, absl::string_view part) {
  PutFixed32(out, static_cast<uint32_t>(part.size()));
  absl::StrAppend(&out, part);
}

absl::StatusOr<CommandKey> CommandKey::FromHex(absl::string_view hex) {
  bool digits = hex.size() == 2 * kSize;
  for (char c : hex) digits = digits && absl::ascii_isxdigit(static_cast<unsigned char>(c));
  if (!digits) {
    return absl::InvalidArgumentError(
        absl::StrCat("command key '", hex, "' is not ", 2 * kSize, " hex digits"));
  }
  return FromBytes(absl::HexStringToBytes(hex));
}

absl::StatusOr<CommandKey> CommandKey::FromBytes(absl::string_view raw) {
  if (raw.size() != kSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("a command key is ", kSize, " bytes, got ", raw.size()));
  }
  std::array<uint8_t, kSize> bytes;
  for (size_t i = 0; i < kSize; ++i) bytes[i] = static_cast<uint8_t>(raw[i]);
  return CommandKey(bytes);
}

std::string CommandKey::Hex() const { return absl::BytesToHexString(Bytes()); }

std::string CommandKey::ShortHex() const { return Hex().substr(0, 12); }

std::string ManifestId(const HeaderManifest& manifest) {
  std::string framing;
  for (const auto& [path, fact] : manifest) {
    AppendKeyFrame(framing, path);
    AppendKeyFrame(framing, fact);
  }
  return Sha256Hex(framing);
}

ObjectEntryKey ObjectEntryKey::Of(const CommandKey& command, const HeaderManifest& manifest) {
  return ObjectEntryKey{command, ManifestId(manifest)};
}

std::string ObjectEntryKey::ToString() const {
  return absl::StrCat(command.ShortHex(), "/object/", entry_id.substr(0, 12));
}

ObjectEntryKey NamedValueKey(absl::string_view name) {
  std::string framing = kNamedValueDomain;
  framing.push_back('\0');
  absl::StrAppend(&framing, name);
  return ObjectEntryKey::Of(CommandKey(Sha256Of(framing)), HeaderManifest{});
}

}  // namespace kcache
