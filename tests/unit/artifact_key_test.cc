// Artifact keys (core/artifact.h) and store value encoding (engine/store/value_format.h).
#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "core/artifact.h"
#include "engine/store/value_format.h"
#include "gtest/gtest.h"

namespace kcache {

// Readable failure messages for keys (found by argument-dependent lookup).
void PrintTo(const ArtifactKey& key, std::ostream* os) { *os << key.ToString(); }

namespace {

KernelId IdOf(uint8_t first, uint8_t fill) {
  std::array<uint8_t, KernelId::kSize> bytes;
  bytes.fill(fill);
  bytes[0] = first;
  return KernelId(bytes);
}

Target T(const char* text) { return *ParseTarget(text); }

ArtifactKey Key(const KernelId& id, ArtifactKind kind, const char* target,
                std::string toolkit = "nvrtc-13.0+1a2b3c4d5e6f", uint32_t driver = 0) {
  return ArtifactKey{id, kind, T(target), std::move(toolkit), driver};
}

TEST(ArtifactKindTest, NamesRoundTripAndUnknownNamesAreRejected) {
  for (ArtifactKind kind : {ArtifactKind::kCubin, ArtifactKind::kPtx, ArtifactKind::kLtoir}) {
    EXPECT_EQ(*ParseArtifactKind(ArtifactKindName(kind)), kind);
  }
  EXPECT_EQ(ArtifactKindName(ArtifactKind::kLtoir), "ltoir");
  EXPECT_EQ(*ParseArtifactKind("PTX"), ArtifactKind::kPtx);
  absl::StatusOr<ArtifactKind> bad = ParseArtifactKind("sass");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "cubin, ptx or ltoir"));
}

TEST(ArtifactKeyTest, EncodingIsPinned) {
  ArtifactKey key = Key(IdOf(0xab, 0x01), ArtifactKind::kPtx, "compute_90a", "tk", 13000);
  std::string expected = "ab" + std::string(62, '0');
  for (size_t i = 2; i < 64; i += 2) expected[i + 1] = '1';
  expected +=
      "02"
      "0b" +
      absl::BytesToHexString("compute_90a") + "02" + absl::BytesToHexString("tk") + "000032c8";
  EXPECT_EQ(absl::BytesToHexString(key.Encode()), expected);
}

TEST(ArtifactKeyTest, DecodeInvertsEncode) {
  std::vector<ArtifactKey> keys = {
      Key(IdOf(1, 2), ArtifactKind::kCubin, "sm_89"),
      Key(IdOf(0xff, 0xff), ArtifactKind::kPtx, "compute_86", "", 0),
      Key(IdOf(0, 0), ArtifactKind::kLtoir, "sm_100f", std::string(255, 'x'), 0xffffffff),
      Key(IdOf(7, 9), ArtifactKind::kCubin, "sm_90a", "nvrtc-13.0+abc", 12090),
  };
  for (const ArtifactKey& key : keys) {
    absl::StatusOr<ArtifactKey> decoded = ArtifactKey::Decode(key.Encode());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, key) << key.ToString();
  }
}

TEST(ArtifactKeyTest, EveryKeyOfAKernelStartsWithItsPrefixAndNoOtherDoes) {
  KernelId a = IdOf(5, 5), b = IdOf(5, 6);
  for (const char* target : {"sm_75", "sm_120", "compute_75"}) {
    for (ArtifactKind kind : {ArtifactKind::kCubin, ArtifactKind::kPtx}) {
      EXPECT_TRUE(absl::StartsWith(Key(a, kind, target).Encode(), ArtifactKey::KernelPrefix(a)));
      EXPECT_FALSE(absl::StartsWith(Key(b, kind, target).Encode(), ArtifactKey::KernelPrefix(a)));
    }
  }
}

TEST(ArtifactKeyTest, EncodedKeysSortByKernelThenKindThenDriver) {
  std::vector<ArtifactKey> keys = {
      Key(IdOf(2, 0), ArtifactKind::kCubin, "sm_75"),
      Key(IdOf(1, 9), ArtifactKind::kLtoir, "sm_121", "zzz", 99999),
      Key(IdOf(1, 9), ArtifactKind::kCubin, "sm_89"),
      Key(IdOf(1, 9), ArtifactKind::kPtx, "compute_89", "tk", 256),
      Key(IdOf(1, 9), ArtifactKind::kPtx, "compute_89", "tk", 1),
  };
  std::vector<std::string> encoded;
  for (const ArtifactKey& key : keys) encoded.push_back(key.Encode());
  std::sort(encoded.begin(), encoded.end());
  std::vector<ArtifactKey> sorted;
  for (const std::string& e : encoded) sorted.push_back(*ArtifactKey::Decode(e));
  EXPECT_EQ(sorted[0], keys[2]);  // kernel 1, cubin
  EXPECT_EQ(sorted[1], keys[4]);  // kernel 1, ptx, driver 1
  EXPECT_EQ(sorted[2], keys[3]);  // kernel 1, ptx, driver 256 (big-endian driver)
  EXPECT_EQ(sorted[3], keys[1]);  // kernel 1, ltoir
  EXPECT_EQ(sorted[4], keys[0]);  // kernel 2
}

TEST(ArtifactKeyTest, DecodeRejectsTruncatedAndGarbageInput) {
  std::string good = Key(IdOf(3, 4), ArtifactKind::kCubin, "sm_86").Encode();
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_EQ(ArtifactKey::Decode(good.substr(0, n)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "length " << n;
  }
  EXPECT_FALSE(ArtifactKey::Decode(good + "x").ok());
  std::string bad_kind = good;
  bad_kind[KernelId::kSize] = 4;
  EXPECT_FALSE(ArtifactKey::Decode(bad_kind).ok());
  bad_kind[KernelId::kSize] = 0;
  EXPECT_FALSE(ArtifactKey::Decode(bad_kind).ok());
  // A well-framed target that parses ("8.6") but is not the canonical spelling ("sm_86").
  std::string non_canonical = good.substr(0, KernelId::kSize + 1) +
                              "\x03"
                              "8.6" +
                              good.substr(KernelId::kSize + 2 + 5);
  EXPECT_TRUE(
      absl::StrContains(ArtifactKey::Decode(non_canonical).status().message(), "canonical"));
  EXPECT_FALSE(ArtifactKey::Decode(std::string(40, '\xff')).ok());
  EXPECT_FALSE(ArtifactKey::Decode("hello").ok());
}

TEST(ArtifactKeyTest, ToStringNamesKernelKindTargetToolkitAndDriver) {
  ArtifactKey key = Key(IdOf(0x3f, 0xa2), ArtifactKind::kCubin, "sm_89", "nvrtc-13.0+x");
  EXPECT_EQ(key.ToString(), "3fa2a2a2a2a2/cubin/sm_89/nvrtc-13.0+x");
  key.driver = 13000;
  EXPECT_EQ(key.ToString(), "3fa2a2a2a2a2/cubin/sm_89/nvrtc-13.0+x/driver=13000");
}

TEST(ArtifactTest, PayloadChecksumIsXxh3AndNowIsCurrent) {
  EXPECT_EQ(PayloadChecksum(""), 0x2D06800538D394C2ull);  // XXH3-64 of nothing
  EXPECT_NE(PayloadChecksum("a"), PayloadChecksum("b"));
  int64_t now = NowUnixMillis();
  EXPECT_GT(now, int64_t{1704067200000});  // after 2024-01-01
  EXPECT_NEAR(static_cast<double>(now), static_cast<double>(time(nullptr)) * 1000, 5000);
}

// --- value_format ---

ArtifactMeta SampleMeta(absl::string_view bytes) {
  ArtifactMeta meta;
  meta.key = Key(IdOf(9, 8), ArtifactKind::kCubin, "sm_90a", "nvrtc-13.0+f00d", 0);
  meta.kernel_name = "softmax";
  meta.lowered_names = {{"softmax<float>", "_Z7softmaxIfEvPf"}, {"x", ""}};
  meta.compile_log = "warning: something";
  meta.compile_micros = 123456;
  meta.size = bytes.size();
  meta.checksum = PayloadChecksum(bytes);
  meta.created_unix_ms = 1700000000123;
  meta.last_used_unix_ms = -5;
  meta.min_driver = 13000;
  meta.put_by = "uid 1000 pid 42 via kcached on node-a";
  return meta;
}

void ExpectSameMeta(const ArtifactMeta& a, const ArtifactMeta& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.kernel_name, b.kernel_name);
  EXPECT_EQ(a.lowered_names, b.lowered_names);
  EXPECT_EQ(a.compile_log, b.compile_log);
  EXPECT_EQ(a.compile_micros, b.compile_micros);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.checksum, b.checksum);
  EXPECT_EQ(a.created_unix_ms, b.created_unix_ms);
  EXPECT_EQ(a.last_used_unix_ms, b.last_used_unix_ms);
  EXPECT_EQ(a.min_driver, b.min_driver);
  EXPECT_EQ(a.put_by, b.put_by);
}

KernelRecord SampleKernel() {
  KernelRecord record;
  record.spec.name = "gemm";
  record.spec.source = std::string(300, 'k') + "__global__ void gemm() {}";
  record.spec.headers = {{"a.h", "#define A 1"}, {"dir/b.cuh", std::string(200, 'b')}};
  record.spec.options = {"-std=c++17", "--use_fast_math"};
  record.spec.name_expressions = {"gemm<float>", "gemm<__half>"};
  record.id = ComputeKernelId(record.spec);
  record.arch = ArchRange{89, 120};
  record.want_ltoir = true;
  return record;
}

std::string Compressible(size_t size) {
  std::string out;
  while (out.size() < size) out += "mov.u32 %r1, %r2; // line " + std::to_string(out.size() % 97);
  out.resize(size);
  return out;
}

TEST(ValueFormatTest, ArtifactRoundTripsRawAndCompressed) {
  std::string bytes = Compressible(50000);
  ArtifactMeta meta = SampleMeta(bytes);
  std::string raw = EncodeArtifactValue(meta, bytes, 0);
  std::string packed = EncodeArtifactValue(meta, bytes, 1);
  EXPECT_GT(raw.size(), bytes.size());
  EXPECT_LT(packed.size(), bytes.size() / 4);  // zstd kept: it saves far more than 1/8
  for (const std::string* value : {&raw, &packed}) {
    absl::StatusOr<Artifact> artifact = DecodeArtifactValue(*value);
    ASSERT_TRUE(artifact.ok()) << artifact.status();
    EXPECT_EQ(artifact->bytes, bytes);
    ExpectSameMeta(artifact->meta, meta);
  }
  absl::StatusOr<ArtifactMeta> listed = DecodeArtifactMetaValue(EncodeArtifactMetaValue(meta));
  ASSERT_TRUE(listed.ok()) << listed.status();
  ExpectSameMeta(*listed, meta);
}

TEST(ValueFormatTest, MetadataWithoutWhoPutItReadsAsNotRecordedAndIsWrittenAsBefore) {
  std::string bytes = "payload";
  ArtifactMeta meta = SampleMeta(bytes);
  std::string with = EncodeArtifactMetaValue(meta);
  meta.put_by.clear();
  std::string without = EncodeArtifactMetaValue(meta);
  // No field at all when not recorded: values written before put_by are these bytes.
  EXPECT_EQ(with.size(),
            without.size() + 1 + 4 + std::string("uid 1000 pid 42 via kcached on node-a").size())
      << "put_by is one field of tag, length and bytes";
  absl::StatusOr<ArtifactMeta> listed = DecodeArtifactMetaValue(without);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->put_by, "");
}

TEST(ValueFormatTest, IncompressiblePayloadIsStoredRaw) {
  std::string bytes;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 4096; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bytes.push_back(static_cast<char>(x));
  }
  ArtifactMeta meta = SampleMeta(bytes);
  EXPECT_EQ(EncodeArtifactValue(meta, bytes, 3), EncodeArtifactValue(meta, bytes, 0));
}

TEST(ValueFormatTest, KernelRecordRoundTripsWithItsFullSpec) {
  KernelRecord record = SampleKernel();
  absl::StatusOr<KernelRecord> decoded = DecodeKernelValue(EncodeKernelValue(record, 1));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->id, record.id);
  EXPECT_EQ(decoded->spec.name, record.spec.name);
  EXPECT_EQ(decoded->spec.source, record.spec.source);
  EXPECT_EQ(decoded->spec.headers, record.spec.headers);
  EXPECT_EQ(decoded->spec.options, record.spec.options);
  EXPECT_EQ(decoded->spec.name_expressions, record.spec.name_expressions);
  EXPECT_EQ(decoded->arch.min_arch, 89);
  EXPECT_EQ(decoded->arch.max_arch, 120);
  EXPECT_TRUE(decoded->want_ltoir);
  EXPECT_EQ(ComputeKernelId(decoded->spec), record.id);
}

// Every byte of a small value, flipped three ways, and every truncation must fail with
// DataLoss: nothing in a value is unchecked.
template <typename Decode>
void ExpectEveryDamageDetected(const std::string& value, Decode decode) {
  ASSERT_TRUE(decode(value).ok());
  for (size_t i = 0; i < value.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string damaged = value;
      damaged[i] = static_cast<char>(damaged[i] ^ mask);
      EXPECT_EQ(decode(damaged).status().code(), absl::StatusCode::kDataLoss)
          << "byte " << i << " mask " << int{mask};
    }
  }
  for (size_t n = 0; n < value.size(); ++n) {
    EXPECT_EQ(decode(value.substr(0, n)).status().code(), absl::StatusCode::kDataLoss)
        << "truncated to " << n;
  }
  EXPECT_EQ(decode(value + '\0').status().code(), absl::StatusCode::kDataLoss);
}

TEST(ValueFormatTest, AnyFlippedByteOrTruncationOfAnArtifactIsDataLoss) {
  std::string bytes = Compressible(300);
  ArtifactMeta meta = SampleMeta(bytes);
  ExpectEveryDamageDetected(EncodeArtifactValue(meta, bytes, 0), DecodeArtifactValue);
  ExpectEveryDamageDetected(EncodeArtifactValue(meta, bytes, 1), DecodeArtifactValue);
  ExpectEveryDamageDetected(EncodeArtifactMetaValue(meta), DecodeArtifactMetaValue);
}

TEST(ValueFormatTest, AnyFlippedByteOrTruncationOfAKernelRecordIsDataLoss) {
  ExpectEveryDamageDetected(EncodeKernelValue(SampleKernel(), 1), DecodeKernelValue);
}

TEST(ValueFormatTest, AValueOfAnotherTypeIsRejected) {
  std::string bytes = "abc";
  ArtifactMeta meta = SampleMeta(bytes);
  EXPECT_EQ(DecodeKernelValue(EncodeArtifactValue(meta, bytes, 0)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeArtifactValue(EncodeArtifactMetaValue(meta)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeArtifactMetaValue(EncodeKernelValue(SampleKernel(), 0)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(ValueFormatTest, FormatVersionRoundTripsAndRejectsGarbage) {
  EXPECT_EQ(*DecodeFormatVersion(EncodeFormatVersion(kStoreFormatVersion)), kStoreFormatVersion);
  EXPECT_EQ(EncodeFormatVersion(12), "12");
  EXPECT_FALSE(DecodeFormatVersion("").ok());
  EXPECT_FALSE(DecodeFormatVersion("0").ok());
  EXPECT_FALSE(DecodeFormatVersion("1x").ok());
}

}  // namespace
}  // namespace kcache
