#include "engine/shared/shared_entry.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/coding.h"
#include "core/sha256.h"
#include "engine/store/value_format.h"

namespace kcache {
namespace {

constexpr char kMagic[] = "KCSE";
constexpr size_t kHeaderSize = 4 + 1 + 8 + 4;
constexpr size_t kMacSize = 32;

// HMAC-SHA-256 over u32be(len(redis_key)) | redis_key | signed_part.
std::string Mac(absl::string_view key, absl::string_view redis_key, absl::string_view signed_part) {
  std::string message;
  message.reserve(4 + redis_key.size() + signed_part.size());
  PutBigEndian32(message, static_cast<uint32_t>(redis_key.size()));
  message.append(redis_key.data(), redis_key.size());
  message.append(signed_part.data(), signed_part.size());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &out_len);
  return std::string(reinterpret_cast<char*>(out), out_len);
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int error = errno;
    std::string message = absl::StrCat("shared key file ", path, ": ", std::strerror(error));
    if (error == EACCES) return absl::PermissionDeniedError(message);
    if (error == ENOENT) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<std::string> key = SharedKeyFromText(bytes.str());
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared key file ", path, ": ", key.status().message()));
  }
  return key;
}

}  // namespace

absl::StatusOr<std::string> SharedKeyFromText(absl::string_view text) {
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "not text (byte 0x", absl::Hex(c, absl::kZeroPad2), " at offset ", i,
          "): a key file holds the key as printable text, such as base64, never raw bytes; ",
          kSharedKeyHowTo));
    }
  }
  if (text.size() < kSharedKeyMinBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a shared key must hold at least ",
                                                   kSharedKeyMinBytes, " characters (has ",
                                                   text.size(), "); ", kSharedKeyHowTo));
  }
  return std::string(text);
}

absl::StatusOr<SharedKeys> SharedKeys::FromBytes(std::string primary,
                                                 std::optional<std::string> secondary) {
  for (const std::string* key : {&primary, secondary ? &*secondary : nullptr}) {
    if (key != nullptr && key->size() < kSharedKeyMinBytes) {
      return absl::InvalidArgumentError(absl::StrCat("a shared key must hold at least ",
                                                     kSharedKeyMinBytes, " bytes (has ",
                                                     key->size(), "); ", kSharedKeyHowTo));
    }
  }
  SharedKeys keys;
  keys.primary_ = std::move(primary);
  keys.secondary_ = std::move(secondary);
  return keys;
}

absl::StatusOr<SharedKeys> SharedKeys::Load(const std::string& primary_path,
                                            const std::string& secondary_path) {
  absl::StatusOr<std::string> primary = ReadKeyFile(primary_path);
  if (!primary.ok()) return primary.status();
  std::optional<std::string> secondary;
  if (!secondary_path.empty()) {
    absl::StatusOr<std::string> read = ReadKeyFile(secondary_path);
    if (!read.ok()) return read.status();
    secondary = *std::move(read);
  }
  return FromBytes(*std::move(primary), std::move(secondary));
}

std::string SharedKeyId(absl::string_view key) {
  std::string input = absl::StrCat(absl::string_view("kcache-shared-key-id\0", 21), key);
  Sha256Digest digest = Sha256Of(input);
  return std::string(reinterpret_cast<const char*>(digest.data()), 8);
}

std::string SharedEntryRedisKey(const ArtifactKey& key) {
  return absl::StrCat("kcache:v1:{", absl::BytesToHexString(key.Encode()), "}:a");
}

std::string SharedLeaseRedisKey(const ArtifactKey& key) {
  return absl::StrCat("kcache:v1:{", absl::BytesToHexString(key.Encode()), "}:lease");
}

std::string SealSharedEntry(const SharedKeys& keys, const Artifact& artifact) {
  return SealSharedEntryAt(keys, artifact, SharedEntryRedisKey(artifact.meta.key));
}

absl::StatusOr<Artifact> OpenSharedEntry(const SharedKeys& keys, const ArtifactKey& expected,
                                         absl::string_view frame) {
  return OpenSharedEntryAt(keys, expected, SharedEntryRedisKey(expected), frame);
}

std::string SealSharedEntryAt(const SharedKeys& keys, const Artifact& artifact,
                              absl::string_view redis_key) {
  ArtifactMeta meta = artifact.meta;
  meta.size = artifact.bytes.size();
  meta.checksum = PayloadChecksum(artifact.bytes);
  std::string body = EncodeArtifactValue(meta, artifact.bytes, /*zstd_level=*/1);
  std::string frame;
  frame.reserve(kSharedEntryOverhead + body.size());
  frame.append(kMagic, 4);
  frame.push_back(static_cast<char>(kSharedEntryVersion));
  frame.append(SharedKeyId(keys.primary()));
  PutBigEndian32(frame, static_cast<uint32_t>(body.size()));
  frame.append(body);
  frame.append(Mac(keys.primary(), redis_key, frame));
  return frame;
}

absl::StatusOr<Artifact> OpenSharedEntryAt(const SharedKeys& keys, const ArtifactKey& expected,
                                           absl::string_view redis_key, absl::string_view frame) {
  if (frame.size() < kSharedEntryOverhead) {
    return absl::DataLossError(absl::StrCat("shared entry truncated (", frame.size(), " bytes)"));
  }
  if (frame.substr(0, 4) != absl::string_view(kMagic, 4)) {
    return absl::DataLossError("shared entry: bad magic");
  }
  if (static_cast<uint8_t>(frame[4]) != kSharedEntryVersion) {
    return absl::DataLossError(
        absl::StrCat("shared entry: unknown version ", static_cast<int>(frame[4])));
  }
  if (DecodeBigEndian32(frame.data() + 13) != frame.size() - kSharedEntryOverhead) {
    return absl::DataLossError("shared entry: length does not match (truncated or padded)");
  }
  absl::string_view key_id = frame.substr(5, 8);
  const std::string* key = nullptr;
  if (key_id == SharedKeyId(keys.primary())) {
    key = &keys.primary();
  } else if (keys.secondary() && key_id == SharedKeyId(*keys.secondary())) {
    key = &*keys.secondary();
  } else {
    return absl::DataLossError("shared entry: sealed under a key this daemon does not hold");
  }
  absl::string_view signed_part = frame.substr(0, frame.size() - kMacSize);
  std::string mac = Mac(*key, redis_key, signed_part);
  if (CRYPTO_memcmp(mac.data(), frame.data() + signed_part.size(), kMacSize) != 0) {
    return absl::DataLossError("shared entry: MAC does not verify");
  }
  absl::StatusOr<Artifact> artifact =
      DecodeArtifactValue(frame.substr(kHeaderSize, signed_part.size() - kHeaderSize));
  if (!artifact.ok()) {
    return absl::DataLossError(absl::StrCat("shared entry: ", artifact.status().message()));
  }
  if (!(artifact->meta.key == expected)) {
    return absl::DataLossError("shared entry: holds another artifact");
  }
  return artifact;
}

}  // namespace kcache
