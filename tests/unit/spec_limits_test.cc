// core's kernel-spec limits (ValidateSpecLimits): one definition, used by the daemon's front
// end, the manifest loader and libkcache before it sends; each refusal names the field and the
// limit.
#include <gtest/gtest.h>

#include <string>

#include "core/kernel_spec.h"

namespace kcache {
namespace {

KernelSpec Small() {
  KernelSpec spec;
  spec.name = "k";
  spec.source = "extern \"C\" __global__ void k() {}\n";
  return spec;
}

void ExpectRefused(const KernelSpec& spec, const std::string& says) {
  absl::Status s = ValidateSpecLimits(spec, "spec");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << says;
  EXPECT_NE(s.message().find(says), absl::string_view::npos) << s;
}

TEST(SpecLimitsTest, ASmallSpecPasses) { EXPECT_TRUE(ValidateSpecLimits(Small(), "spec").ok()); }

TEST(SpecLimitsTest, EachLimitIsNamed) {
  KernelSpec spec = Small();
  spec.source.clear();
  ExpectRefused(spec, "spec: source is empty");

  spec = Small();
  spec.source.assign(kMaxSpecBytes + 1, 'x');
  ExpectRefused(spec, "the limit is 3145728 (3 MiB)");

  spec = Small();
  spec.source.push_back('\0');
  ExpectRefused(spec, "spec.source: contains a NUL byte");

  spec = Small();
  spec.name.assign(kMaxKernelNameBytes + 1, 'n');
  ExpectRefused(spec, "name is 257 bytes; the limit is 256");

  spec = Small();
  spec.source_name.assign(kMaxSourceNameBytes + 1, 's');
  ExpectRefused(spec, "source_name is 256 bytes; the limit is 255");

  spec = Small();
  spec.options.assign(kMaxSpecOptions + 1, "-lineinfo");
  ExpectRefused(spec, "has 257 options; the limit is 256");

  spec = Small();
  spec.name_expressions.push_back(std::string(kMaxShortField + 1, 'e'));
  ExpectRefused(spec, "spec.name_expressions[0]: is 4097 bytes; the limit is 4096");

  spec = Small();
  spec.headers[""] = "x";
  ExpectRefused(spec, "has no name");

  spec = Small();
  spec.headers["op.cuh"] = std::string("a\0b", 3);
  ExpectRefused(spec, "spec.headers[op.cuh].content: contains a NUL byte at offset 1");
}

// Found by tests/fuzz/manifest_fuzzer: a manifest could carry a name expression that is not
// UTF-8, which no worker can send (a protobuf string) and `kcache export-manifest` could not
// write back. Fields that are strings on the wire must be UTF-8; sources and headers need not.
TEST(SpecLimitsTest, TextFieldsThatAreProtobufStringsMustBeUtf8) {
  KernelSpec spec = Small();
  spec.name_expressions = {"k<float>", "k<\xff>"};
  ExpectRefused(spec, "spec.name_expressions[1]: is not UTF-8 (byte 0xff at offset 2)");

  spec = Small();
  spec.options = {"-DX=\xc3"};  // cut short
  ExpectRefused(spec, "spec.options[0]: is not UTF-8 (byte 0xc3 at offset 4)");

  spec = Small();
  spec.headers["op\xc0\xae.cuh"] = "x";  // an overlong '.'
  ExpectRefused(spec, "name: is not UTF-8 (byte 0xc0 at offset 2)");

  spec = Small();
  spec.name = "k\xed\xa0\x80";  // a surrogate
  ExpectRefused(spec, "spec.name: is not UTF-8");

  spec = Small();
  spec.source_name = "k\xe9.cu";
  ExpectRefused(spec, "spec.source_name: is not UTF-8");

  spec = Small();
  spec.source =
      "// gr\xf6\xdf"
      "e (latin-1)\nextern \"C\" __global__ void k() {}\n";
  spec.headers["op.cuh"] = "\xff\xfe";
  spec.options = {"-DUNIT=\xc2\xb5s"};  // "µs"
  spec.name_expressions = {"k<\xf0\x9f\x98\x80>"};
  EXPECT_TRUE(ValidateSpecLimits(spec, "spec").ok()) << ValidateSpecLimits(spec, "spec");
}

TEST(Utf8ValidPrefixTest, StopsAtTheFirstByteThatIsNotUtf8) {
  EXPECT_EQ(Utf8ValidPrefix(""), 0u);
  EXPECT_EQ(Utf8ValidPrefix("ascii"), 5u);
  EXPECT_EQ(Utf8ValidPrefix("\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf"), 9u);  // é € U+10FFFF
  EXPECT_EQ(Utf8ValidPrefix("a\x80"), 1u);             // a continuation byte alone
  EXPECT_EQ(Utf8ValidPrefix("ab\xe2\x82"), 2u);        // cut short
  EXPECT_EQ(Utf8ValidPrefix("\xe0\x80\xaf"), 0u);      // overlong
  EXPECT_EQ(Utf8ValidPrefix("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(Utf8ValidPrefix("\xf8\x88\x80\x80\x80"), 0u);
}

}  // namespace
}  // namespace kcache
