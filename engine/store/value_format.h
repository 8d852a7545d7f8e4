// The on-disk encoding of store values (docs/store-format.md): a fixed header with a magic,
// a format version, lengths and two XXH3-64 checksums (one over header + metadata, one over
// the stored payload), then a tagged metadata block, then the payload (zstd or raw).
// Every decoder verifies both checksums and all framing, and answers DataLoss on any
// mismatch or truncation: a value that does not verify is never returned.
//
// Pure functions, no I/O: the RocksDB store (rocks_store.cc) and, later, remote tiers use
// the same encoding. Thread-safe.
#ifndef KCACHE_ENGINE_STORE_VALUE_FORMAT_H_
#define KCACHE_ENGINE_STORE_VALUE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"

namespace kcache {

// Version of the whole store layout (column families, keys, values). Written to the "meta"
// column family when a store is created; a store with a larger number is refused.
inline constexpr uint32_t kStoreFormatVersion = 1;

// Column families and "meta" keys (docs/store-format.md).
inline constexpr char kArtifactsFamily[] = "artifacts";         // key: ArtifactKey::Encode()
inline constexpr char kArtifactMetaFamily[] = "artifact_meta";  // same key, metadata only
inline constexpr char kKernelsFamily[] = "kernels";             // key: 32 kernel id bytes
inline constexpr char kMetaFamily[] = "meta";
inline constexpr char kFormatVersionKey[] = "format_version";  // decimal ASCII
inline constexpr char kCreatedKey[] = "created_unix_ms";       // decimal ASCII

// Version byte inside every value; decoders accept exactly this one.
inline constexpr uint8_t kValueFormatVersion = 1;
// Size of the fixed header in front of every value.
inline constexpr size_t kValueHeaderSize = 44;

enum class ValueType : uint8_t {
  kArtifact = 1,      // metadata + payload (the compiled bytes)
  kArtifactMeta = 2,  // metadata only: the listing entry kept beside each artifact
  kKernel = 3,        // kernel record: small fields in metadata, source + headers as payload
};

// Encodes an artifact value. Preconditions: meta.size == bytes.size() and
// meta.checksum == PayloadChecksum(bytes) (Store::Put fills them in). The payload is
// zstd-compressed at `zstd_level` when that saves at least 1/8 of it; zstd_level <= 0 stores
// it raw (fastest to read).
std::string EncodeArtifactValue(const ArtifactMeta& meta, absl::string_view bytes, int zstd_level);
// The same value in two parts, for a writer that hands them on without joining them
// (rocksdb::SliceParts): `head` (the fixed header and the metadata) then `payload`, which views
// `compressed` when zstd saved enough and the caller's `bytes` otherwise. Once it is encoded,
// a caller may free `bytes` when compressed is set; otherwise payload still points into them.
struct ValueParts {
  std::string head;
  std::unique_ptr<char[]> compressed;  // null: the payload is stored raw
  absl::string_view payload;
};
ValueParts EncodeArtifactValueParts(const ArtifactMeta& meta, absl::string_view bytes,
                                    int zstd_level);
// Decodes and verifies an artifact value: both checksums, framing, meta.size, and (for a
// compressed payload) PayloadChecksum of the decompressed bytes against meta.checksum.
absl::StatusOr<Artifact> DecodeArtifactValue(absl::string_view value);

// The metadata-only listing value (no payload): what ListArtifacts reads.
std::string EncodeArtifactMetaValue(const ArtifactMeta& meta);
absl::StatusOr<ArtifactMeta> DecodeArtifactMetaValue(absl::string_view value);

// Kernel record values: id, name, options, name expressions, arch range and want_ltoir in
// the metadata; source and headers in the (compressed) payload.
std::string EncodeKernelValue(const KernelRecord& record, int zstd_level);
absl::StatusOr<KernelRecord> DecodeKernelValue(absl::string_view value);

// The format version stored under kFormatVersionKey.
std::string EncodeFormatVersion(uint32_t version);
absl::StatusOr<uint32_t> DecodeFormatVersion(absl::string_view value);

}  // namespace kcache

#endif  // KCACHE_ENGINE_STORE_VALUE_FORMAT_H_
