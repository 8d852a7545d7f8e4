// Fuzzes the stored-value decoders (engine/store/value_format.h): whatever bytes a store
// hands back decode or answer DataLoss, and what decodes encodes again to a value that
// decodes to the same thing. The first byte picks the decoder (bits 0-1: artifact, artifact
// metadata, kernel record, format version) and, with bit 2, has the lengths and both XXH3
// checksums of the header written to match the rest (docs/store-format.md, "Values"), so that
// the fuzzer reaches the metadata and payload parsers behind them.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "engine/store/value_format.h"
#include "tests/fuzz/fuzz_check.h"

namespace kcache {
namespace {

// Header offsets, as docs/store-format.md lays them out.
constexpr size_t kMetaSumOffset = 4;
constexpr size_t kPayloadSumOffset = 12;
constexpr size_t kCoveredOffset = 20;
constexpr size_t kMetaLenOffset = 24;
constexpr size_t kPayloadLenOffset = 28;

uint64_t Load(const std::string& v, size_t offset, int bytes) {
  uint64_t out = 0;
  for (int i = bytes - 1; i >= 0; --i) out = (out << 8) | static_cast<uint8_t>(v[offset + i]);
  return out;
}
void Store(std::string& v, size_t offset, int bytes, uint64_t value) {
  for (int i = 0; i < bytes; ++i) v[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

void MakeFramingConsistent(std::string& v) {
  if (v.size() < kValueHeaderSize) return;
  uint64_t body = v.size() - kValueHeaderSize;
  uint64_t meta_len = Load(v, kMetaLenOffset, 4) % (body + 1);
  Store(v, kMetaLenOffset, 4, meta_len);
  Store(v, kPayloadLenOffset, 8, body - meta_len);
  const char* payload = v.data() + kValueHeaderSize + meta_len;
  Store(v, kPayloadSumOffset, 8, XXH3_64bits(payload, body - meta_len));
  Store(v, kMetaSumOffset, 8,
        XXH3_64bits(v.data() + kCoveredOffset, kValueHeaderSize - kCoveredOffset + meta_len));
}

void CheckCorrupt(const absl::Status& status) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kDataLoss, status.ToString());
}

bool SameMeta(const ArtifactMeta& a, const ArtifactMeta& b) {
  return a.key == b.key && a.kernel_name == b.kernel_name && a.lowered_names == b.lowered_names &&
         a.compile_log == b.compile_log && a.compile_micros == b.compile_micros &&
         a.size == b.size && a.checksum == b.checksum && a.created_unix_ms == b.created_unix_ms &&
         a.last_used_unix_ms == b.last_used_unix_ms && a.min_driver == b.min_driver;
}

bool SameRecord(const KernelRecord& a, const KernelRecord& b) {
  return a.id == b.id && a.spec.name == b.spec.name && a.spec.source_name == b.spec.source_name &&
         a.spec.source == b.spec.source && a.spec.headers == b.spec.headers &&
         a.spec.options == b.spec.options && a.spec.name_expressions == b.spec.name_expressions &&
         a.arch.min_arch == b.arch.min_arch && a.arch.max_arch == b.arch.max_arch &&
         a.want_ltoir == b.want_ltoir;
}

void CheckArtifact(absl::string_view value) {
  absl::StatusOr<Artifact> artifact = DecodeArtifactValue(value);
  if (!artifact.ok()) return CheckCorrupt(artifact.status());
  FUZZ_CHECK(artifact->meta.size == artifact->bytes.size(), "size");
  FUZZ_CHECK(artifact->meta.checksum == PayloadChecksum(artifact->bytes), "checksum");
  for (int level : {0, 1}) {
    absl::StatusOr<Artifact> again =
        DecodeArtifactValue(EncodeArtifactValue(artifact->meta, artifact->bytes, level));
    FUZZ_CHECK(again.ok(), again.status().ToString());
    FUZZ_CHECK(SameMeta(again->meta, artifact->meta) && again->bytes == artifact->bytes,
               "artifact after encode/decode");
  }
}

void CheckArtifactMeta(absl::string_view value) {
  absl::StatusOr<ArtifactMeta> meta = DecodeArtifactMetaValue(value);
  if (!meta.ok()) return CheckCorrupt(meta.status());
  absl::StatusOr<ArtifactMeta> again = DecodeArtifactMetaValue(EncodeArtifactMetaValue(*meta));
  FUZZ_CHECK(again.ok(), again.status().ToString());
  FUZZ_CHECK(SameMeta(*again, *meta), "artifact metadata after encode/decode");
}

void CheckKernel(absl::string_view value) {
  absl::StatusOr<KernelRecord> record = DecodeKernelValue(value);
  if (!record.ok()) return CheckCorrupt(record.status());
  for (int level : {0, 1}) {
    absl::StatusOr<KernelRecord> again = DecodeKernelValue(EncodeKernelValue(*record, level));
    FUZZ_CHECK(again.ok(), again.status().ToString());
    FUZZ_CHECK(SameRecord(*again, *record), "kernel record after encode/decode");
  }
}

void CheckFormatVersion(absl::string_view value) {
  absl::StatusOr<uint32_t> version = DecodeFormatVersion(value);
  if (!version.ok()) return CheckCorrupt(version.status());
  FUZZ_CHECK(*version > 0, "version 0");
  absl::StatusOr<uint32_t> again = DecodeFormatVersion(EncodeFormatVersion(*version));
  FUZZ_CHECK(again.ok() && *again == *version, "format version after encode/decode");
}

}  // namespace
}  // namespace kcache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string value(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 4) kcache::MakeFramingConsistent(value);
  switch (data[0] & 3) {
    case 0:
      kcache::CheckArtifact(value);
      break;
    case 1:
      kcache::CheckArtifactMeta(value);
      break;
    case 2:
      kcache::CheckKernel(value);
      break;
    default:
      kcache::CheckFormatVersion(value);
      break;
  }
  return 0;
}
