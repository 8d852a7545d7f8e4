// The kernel ids a process already knows (client/lib/known_kernel_ids.h): a spec is recognised
// by its FingerprintKernel, which every part the kernel id covers changes and nothing else
// does; a spec not remembered gets ComputeKernelId's id; a remembered id is used for exactly
// the spec it was remembered with, never for one changed in any part; the memo is bounded.
#include "client/lib/known_kernel_ids.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/kernel_spec.h"

namespace kcache::client {
namespace {

KernelSpec Spec(const std::string& tag) {
  KernelSpec spec;
  spec.name = "scale";
  spec.source = absl::StrCat("#include \"scale.cuh\"\n// ", tag, "\n");
  spec.headers = {{"scale.cuh", "constexpr float kScale = 2.0f;\n"}};
  spec.options = {"-DTILE=16"};
  spec.name_expressions = {"scale<float>"};
  return spec;
}

// Each change of a part the kernel id covers, applied to `base`.
std::vector<std::pair<std::string, KernelSpec>> Changed(const KernelSpec& base) {
  std::vector<std::pair<std::string, KernelSpec>> out;
  out.emplace_back("source", base);
  out.back().second.source += " ";
  out.emplace_back("header content", base);
  out.back().second.headers["scale.cuh"] = "constexpr float kScale = 3.0f;\n";
  out.emplace_back("header name", base);
  out.back().second.headers = {{"scale2.cuh", base.headers.begin()->second}};
  out.emplace_back("one more header", base);
  out.back().second.headers["more.cuh"] = "";
  out.emplace_back("option", base);
  out.back().second.options.push_back("--use_fast_math");
  out.emplace_back("option order", base);
  out.back().second.options = {"--use_fast_math", "-DTILE=16"};
  out.emplace_back("name expression", base);
  out.back().second.name_expressions = {"scale<double>"};
  // A field's bytes moved into the next one: the framing's lengths keep them apart.
  out.emplace_back("bytes moved between fields", base);
  out.back().second.options = {"-DTILE=1", "6"};
  return out;
}

KernelId Vouched(char fill) {
  std::string raw(KernelId::kSize, fill);
  return *KernelId::FromBytes(raw);
}

TEST(FingerprintKernelTest, ChangesWithEveryPartTheIdCoversAndNothingElse) {
  KernelSpec base = Spec("fingerprint");
  KernelFingerprint fingerprint = FingerprintKernel(base);
  EXPECT_EQ(FingerprintKernel(base), fingerprint);  // deterministic
  for (const auto& [what, spec] : Changed(base)) {
    SCOPED_TRACE(what);
    EXPECT_NE(ComputeKernelId(spec), ComputeKernelId(base));
    EXPECT_NE(FingerprintKernel(spec), fingerprint);
  }
  KernelSpec renamed = base;
  renamed.name = "other_name";
  renamed.source_name = "other.cu";
  EXPECT_EQ(ComputeKernelId(renamed), ComputeKernelId(base));  // not in the id: not in it
  EXPECT_EQ(FingerprintKernel(renamed), fingerprint);
}

TEST(KnownKernelIdTest, ASpecNotRememberedGetsItsComputedId) {
  KernelSpec spec = Spec("computed");
  EXPECT_EQ(KnownKernelId(spec), ComputeKernelId(spec));
  EXPECT_EQ(KnownKernelId(spec), ComputeKernelId(spec));  // remembered by then: the same
}

TEST(KnownKernelIdTest, ARememberedIdServesExactlyItsSpec) {
  // An id that is not the spec's own makes the memo's answer visible.
  KernelSpec base = Spec("vouched");
  RememberKernelId(base, Vouched('\x5a'));
  EXPECT_EQ(KnownKernelId(base), Vouched('\x5a'));
  KernelSpec same = base;  // an equal spec, another object
  EXPECT_EQ(KnownKernelId(same), Vouched('\x5a'));
  for (const auto& [what, spec] : Changed(base)) {
    SCOPED_TRACE(what);
    EXPECT_EQ(KnownKernelId(spec), ComputeKernelId(spec));
  }
}

TEST(KnownKernelIdTest, RemembersAtMostItsBoundOldestForgottenFirst) {
  KernelSpec first = Spec("bound first");
  RememberKernelId(first, Vouched('\x11'));
  ASSERT_EQ(KnownKernelId(first), Vouched('\x11'));
  for (size_t i = 0; i < kMaxKnownKernelIds; ++i) {
    KernelSpec spec = Spec(absl::StrCat("bound ", i));
    RememberKernelId(spec, Vouched('\x22'));
  }
  EXPECT_EQ(KnownKernelId(first), ComputeKernelId(first)) << "the oldest is still remembered";
  EXPECT_EQ(KnownKernelId(Spec(absl::StrCat("bound ", kMaxKnownKernelIds - 1))), Vouched('\x22'));
}

}  // namespace
}  // namespace kcache::client
