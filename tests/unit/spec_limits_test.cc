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

}  // namespace
}  // namespace kcache
