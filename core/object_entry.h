// The object cache's vocabulary: a command's key, an entry's key, its header manifest, the
// entry itself and a named value's key (engine/objects keeps and finds them).
//
// A compiler launcher's outputs are found in two levels (engine/keys/command_key.h): the
// command's key (key1, hashed before the compile) lists entries, each recorded with the
// manifest of the headers that compile read; an entry serves only where its manifest still
// holds. A named value (the Redis door) is an entry of the same shape under a key of its own.
// How an entry is laid out in a store is engine/objects/object_schema.h's, and only its.
#ifndef KCACHE_CORE_OBJECT_ENTRY_H_
#define KCACHE_CORE_OBJECT_ENTRY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache {

// key1: SHA-256 over a compile command's tagged fields (engine/keys/command_key.h), or over
// a named value's name (NamedValueKey). Not a kernel's id: the two never mix.
class CommandKey {
 public:
  static constexpr size_t kSize = 32;
  CommandKey() = default;
  explicit CommandKey(const std::array<uint8_t, kSize>& bytes) : bytes_(bytes) {}

  // Parses 64 lowercase or uppercase hex digits; InvalidArgument otherwise.
  static absl::StatusOr<CommandKey> FromHex(absl::string_view hex);
  // Takes exactly kSize raw bytes (the wire's key1); InvalidArgument otherwise.
  static absl::StatusOr<CommandKey> FromBytes(absl::string_view raw);

  std::string Hex() const;       // 64 lowercase hex digits
  std::string ShortHex() const;  // the first 12, for display
  absl::string_view Bytes() const {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }
  auto operator<=>(const CommandKey&) const = default;

 private:
  std::array<uint8_t, kSize> bytes_{};
};

// What a compile read, one line each in the compiler's order: (normalized path, its digest or
// another fact of it: engine/keys/file_digests.h), or ("$NAME", what the environment
// variable was: engine/keys/header_manifest.h EnvironmentFact). Not the kernels' manifest
// (core/manifest.h).
using HeaderManifest = std::vector<std::pair<std::string, std::string>>;

// Appends `part` framed as u32le(byte length) + bytes: how key1 (engine/keys/command_key.h)
// and ManifestId frame each field, so that where one field ends changes the hash.
void AppendKeyFrame(std::string& out, absl::string_view part);

// An entry's id under its command key: SHA-256 (64 lowercase hex digits) over the manifest's
// lines, each path and fact framed as u32le(byte length) + bytes. Two compiles that read the
// same files at the same contents make one entry.
std::string ManifestId(const HeaderManifest& manifest);

// One field of key1 as text, kept with each entry so that `kcache explain` can say which
// differs: ("arg", "-O3"), ("tool nvcc", digest), ("env CPATH", value), ("source", digest).
using KeyField = std::pair<std::string, std::string>;

// Names one entry: its command key and its id under it.
struct ObjectEntryKey {
  CommandKey command;
  std::string entry_id;  // ManifestId of the entry's manifest: 64 hex digits

  // The key of the entry whose manifest is `manifest`.
  static ObjectEntryKey Of(const CommandKey& command, const HeaderManifest& manifest);
  std::string ToString() const;  // "3fa2c1d9e0b4/object/5d1e0a9f2c3b", for messages
  auto operator<=>(const ObjectEntryKey&) const = default;
};

// An entry's listing: what a lookup checks before it fetches the bundle
// (engine/objects/object_bundle.h).
struct ObjectEntry {
  ObjectEntryKey key;
  std::string source;  // the normalized source path (a named value: its name, C-escaped)
  HeaderManifest manifest;
  std::vector<KeyField> fields;  // key1's fields
  uint64_t size = 0;             // the bundle's bytes
  // Who put it, in words: what the kcached that took it saw of the peer (a client's own word
  // for it is replaced), or the user and process of a kcache that wrote its own store. Not part
  // of the key; "" when not recorded.
  std::string put_by;
};

// A named value's key: key1 = SHA-256 over "kcache.named-object\0" and the name (a domain of
// its own: never a command's key1), entry id = the empty manifest's id.
ObjectEntryKey NamedValueKey(absl::string_view name);

}  // namespace kcache

#endif  // KCACHE_CORE_OBJECT_ENTRY_H_
