// Entries of the shared tier (docs/shared-tier.md): an artifact value (the store's own
// encoding, engine/store/value_format.h) in a signed, versioned frame:
//
//   "KCSE" | version u8 (1) | key id (8 bytes) | u32be body length | body | HMAC-SHA-256 (32)
//
// The MAC, under a key only daemons hold, covers the Redis key the entry is stored under
// (u32be length, then the bytes) and every byte of the frame before the MAC: an entry
// written without the key, with a flipped byte, truncated, or copied under another
// artifact's key does not open. The key id (the first 8 bytes of SHA-256 over
// "kcache-shared-key-id\0" and the key) names the key that sealed it, so a reader holding
// the new key and the old one (rotation) knows which to check with.
//
// Pure functions, no I/O but SharedKeys::Load. Thread-safe.
#ifndef KCACHE_ENGINE_SHARED_SHARED_ENTRY_H_
#define KCACHE_ENGINE_SHARED_SHARED_ENTRY_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"

namespace kcache {

inline constexpr uint8_t kSharedEntryVersion = 1;
inline constexpr size_t kSharedEntryOverhead = 4 + 1 + 8 + 4 + 32;  // header + MAC
inline constexpr size_t kSharedKeyMinBytes = 32;

// The keys a daemon holds: `primary` seals and opens; `secondary` (optional) only opens —
// the key being replaced during a rotation, or the one replacing it.
class SharedKeys {
 public:
  // From key files, each read by SharedKeyFromText. An empty `secondary_path`: none.
  // InvalidArgument / NotFound / PermissionDenied naming the one file that was wrong.
  static absl::StatusOr<SharedKeys> Load(const std::string& primary_path,
                                         const std::string& secondary_path = "");
  // The same from the key bytes (InvalidArgument when one is too short).
  static absl::StatusOr<SharedKeys> FromBytes(std::string primary,
                                              std::optional<std::string> secondary = {});

  const std::string& primary() const { return primary_; }
  const std::optional<std::string>& secondary() const { return secondary_; }

 private:
  std::string primary_;
  std::optional<std::string> secondary_;
};

// How to make a key file, for error messages.
inline constexpr char kSharedKeyHowTo[] =
    "make one with: head -c 32 /dev/urandom | base64 > shared.key";

// The key a key file's contents hold. One rule: a key file is text. The key is the file's
// printable ASCII (0x20..0x7e) with trailing whitespace (a newline) removed, at least
// kSharedKeyMinBytes characters; any other byte (raw random bytes) is refused, naming the byte
// and its offset, so no key is ever silently shortened. InvalidArgument, saying how to make one.
absl::StatusOr<std::string> SharedKeyFromText(absl::string_view text);

// The 8-byte id of a key (as the frame carries it).
std::string SharedKeyId(absl::string_view key);

// The Redis keys of an artifact's entry and of its compile lease: "kcache:v1:{<hex of
// ArtifactKey::Encode()>}:a" and "...:lease" (one hash tag: both live in one slot).
std::string SharedEntryRedisKey(const ArtifactKey& key);
std::string SharedLeaseRedisKey(const ArtifactKey& key);

// Seals `artifact` (its meta.size and meta.checksum are recomputed) under the primary key, for
// storing under SharedEntryRedisKey(artifact.meta.key).
std::string SealSharedEntry(const SharedKeys& keys, const Artifact& artifact);

// Opens a frame read from SharedEntryRedisKey(expected): checks the framing, the MAC under
// the key the frame names (primary or secondary), the artifact value's own checksums, and
// that it holds `expected`. DataLoss, saying which check failed, for anything that does not
// verify: such an entry is never returned.
absl::StatusOr<Artifact> OpenSharedEntry(const SharedKeys& keys, const ArtifactKey& expected,
                                         absl::string_view frame);

// The same two for an entry stored under another Redis key than SharedEntryRedisKey (the
// client-made objects' namespace, daemon/objects/fleet_object_cache.h): the MAC covers
// `redis_key`, so a frame read from one key never opens as another key's.
std::string SealSharedEntryAt(const SharedKeys& keys, const Artifact& artifact,
                              absl::string_view redis_key);
absl::StatusOr<Artifact> OpenSharedEntryAt(const SharedKeys& keys, const ArtifactKey& expected,
                                           absl::string_view redis_key, absl::string_view frame);

}  // namespace kcache

#endif  // KCACHE_ENGINE_SHARED_SHARED_ENTRY_H_
