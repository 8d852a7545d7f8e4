#include "core/kernel_spec.h"

#include <openssl/sha.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

constexpr char kFramingMagic[] = "kcache.kernel";  // written with its terminating NUL

void AppendU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendField(std::string& out, absl::string_view bytes) {
  uint64_t n = bytes.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(bytes.data(), bytes.size());
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
  std::string out(kFramingMagic, sizeof(kFramingMagic));
  AppendU32(out, kKernelIdSchemaVersion);
  out.push_back('S');
  AppendField(out, spec.source);
  for (const auto& [name, content] : spec.headers) {  // std::map: sorted by name
    out.push_back('H');
    AppendField(out, name);
    AppendField(out, content);
  }
  for (const auto& option : spec.options) {
    out.push_back('O');
    AppendField(out, option);
  }
  for (const auto& expression : spec.name_expressions) {
    out.push_back('N');
    AppendField(out, expression);
  }
  out.push_back('E');
  return out;
}

KernelId ComputeKernelId(const KernelSpec& spec) {
  std::string framing = CanonicalKernelFraming(spec);
  std::array<uint8_t, KernelId::kSize> digest;
  SHA256(reinterpret_cast<const unsigned char*>(framing.data()), framing.size(), digest.data());
  return KernelId(digest);
}

}  // namespace kcache
