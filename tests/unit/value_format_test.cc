// The stored-value decoders (engine/store/value_format.h) on values whose checksums match but
// whose sizes lie: a decoder answers DataLoss without trusting the sizes it reads. (Round trips
// and damage detection: ValueFormatTest in artifact_key_test.cc.)
#include "engine/store/value_format.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <string>

#include "core/kernel_spec.h"

namespace kcache {
namespace {

// Header layout of docs/store-format.md, "Values".
constexpr size_t kMetaSumOffset = 4;
constexpr size_t kCoveredOffset = 20;
constexpr size_t kMetaLenOffset = 24;
constexpr size_t kRawLenOffset = 36;

uint64_t Load(const std::string& v, size_t offset, int bytes) {
  uint64_t out = 0;
  for (int i = bytes - 1; i >= 0; --i) out = (out << 8) | static_cast<uint8_t>(v[offset + i]);
  return out;
}

void Store64(std::string& v, size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) v[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

// Rewrites the header's decompressed size and the metadata checksum that covers it.
void ClaimRawSize(std::string& value, uint64_t raw_size) {
  Store64(value, kRawLenOffset, raw_size);
  uint64_t covered = kValueHeaderSize - kCoveredOffset + Load(value, kMetaLenOffset, 4);
  Store64(value, kMetaSumOffset, XXH3_64bits(value.data() + kCoveredOffset, covered));
}

KernelRecord Record() {
  KernelRecord record;
  record.spec.name = "k";
  record.spec.source = std::string(4096, 'x');  // compresses well: the payload is zstd
  record.id = ComputeKernelId(record.spec);
  return record;
}

// Found by tests/fuzz/value_format_fuzzer: a header claiming 2.5 GB of decompressed payload
// (checksums made to match) had the decoder allocate and clear that much before zstd failed.
TEST(ValueFormatSizesTest, ZstdPayloadClaimingMoreThanItCanHoldIsCorruptBeforeAnyAllocation) {
  std::string value = EncodeKernelValue(Record(), 3);
  ASSERT_TRUE(DecodeKernelValue(value).ok());
  ClaimRawSize(value, uint64_t{2566914049});
  absl::StatusOr<KernelRecord> back = DecodeKernelValue(value);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss) << back.status();
  EXPECT_NE(back.status().message().find("cannot decompress to the 2566914049 bytes"),
            absl::string_view::npos)
      << back.status();
}

TEST(ValueFormatSizesTest, ZstdPayloadClaimingASizeItCouldHoldButDoesNotIsCorrupt) {
  std::string value = EncodeKernelValue(Record(), 3);
  ClaimRawSize(value, Load(value, kRawLenOffset, 8) + 1);
  absl::StatusOr<KernelRecord> back = DecodeKernelValue(value);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss) << back.status();
}

}  // namespace
}  // namespace kcache
