// Kernel ids are pinned by test vectors (also listed in docs/kernel-id.md, and computed there
// by an independent Python implementation of the framing).
#include <gtest/gtest.h>

#include "core/kernel_spec.h"

namespace kcache {
namespace {

KernelSpec TwoHeaderSpec() {
  KernelSpec spec;
  spec.name = "vector3";
  spec.source = "#include \"a.h\"\n#include \"b.h\"\n";
  spec.headers = {{"b.h", "#define B 2\n"}, {"a.h", "#define A 1\n"}};
  spec.options = {"-std=c++17", "-DN=4"};
  spec.name_expressions = {"f<float>", "f<__half>"};
  return spec;
}

TEST(KernelIdTest, MatchesPinnedVectors) {
  EXPECT_EQ(ComputeKernelId(KernelSpec{}).Hex(),
            "c96c58a71762150c1b0b9dbf0661aff405f73f7a5fa6ed8a522dedd98cf665af");
  KernelSpec trivial;
  trivial.source = "extern \"C\" __global__ void k() {}";
  EXPECT_EQ(ComputeKernelId(trivial).Hex(),
            "dca14e54490ad2993879028eedede495513369cd4a47fc529cb5f56b0f843a89");
  EXPECT_EQ(ComputeKernelId(TwoHeaderSpec()).Hex(),
            "8c7b4281bc9f3d845f2a3ce8b7d99e9087769580fca833907fc335e7218bbf52");
}

TEST(KernelIdTest, DisplayNameIsNotPartOfTheId) {
  KernelSpec renamed = TwoHeaderSpec();
  renamed.name = "something_else";
  EXPECT_EQ(ComputeKernelId(renamed), ComputeKernelId(TwoHeaderSpec()));
}

TEST(KernelIdTest, SourceFileNameIsNotPartOfTheId) {
  KernelSpec named = TwoHeaderSpec();
  named.source_name = "kernels/attention.cu";
  EXPECT_EQ(ComputeKernelId(named), ComputeKernelId(TwoHeaderSpec()));
}

TEST(KernelIdTest, OptionOrderMatters) {
  KernelSpec swapped = TwoHeaderSpec();
  std::swap(swapped.options[0], swapped.options[1]);
  EXPECT_EQ(ComputeKernelId(swapped).Hex(),
            "e0e9a384c8812eb48d53b2bf4e12c50cff4d720d66d5951372704803e69d585f");
}

TEST(KernelIdTest, FieldBoundariesChangeTheId) {
  KernelSpec split;
  split.source = "x";
  split.options = {"-DA", "B"};
  KernelSpec joined;
  joined.source = "x";
  joined.options = {"-DAB"};
  EXPECT_EQ(ComputeKernelId(split).Hex(),
            "6798a2cca3048a0a09eea0afa6330a8bb63df9057692308c17d2d525a3099a6a");
  EXPECT_EQ(ComputeKernelId(joined).Hex(),
            "ea47c016adbdf37984f5f688e1a7bfed1caa6d1e1faf293ca649f3067c8ca727");
}

TEST(KernelIdTest, AnOptionIsNotANameExpression) {
  KernelSpec as_option;
  as_option.options = {"f<float>"};
  KernelSpec as_expression;
  as_expression.name_expressions = {"f<float>"};
  EXPECT_NE(ComputeKernelId(as_option), ComputeKernelId(as_expression));
}

TEST(KernelIdTest, HeaderContentAndNameBothCount) {
  KernelSpec base = TwoHeaderSpec();
  KernelSpec content = base;
  content.headers["a.h"] = "#define A 2\n";
  KernelSpec name = base;
  name.headers.erase("a.h");
  name.headers["c.h"] = "#define A 1\n";
  EXPECT_NE(ComputeKernelId(content), ComputeKernelId(base));
  EXPECT_NE(ComputeKernelId(name), ComputeKernelId(base));
}

TEST(KernelIdTest, HexRoundTrips) {
  KernelId id = ComputeKernelId(TwoHeaderSpec());
  absl::StatusOr<KernelId> parsed = KernelId::FromHex(id.Hex());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, id);
  std::string upper = id.Hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  EXPECT_EQ(*KernelId::FromHex(upper), id);
  EXPECT_EQ(id.ShortHex(), id.Hex().substr(0, 12));
}

TEST(KernelIdTest, FromHexRejectsBadText) {
  EXPECT_FALSE(KernelId::FromHex("abc").ok());
  EXPECT_FALSE(KernelId::FromHex(std::string(64, 'g')).ok());
  absl::Status status = KernelId::FromHex("xyz").status();
  EXPECT_NE(status.message().find("'xyz'"), absl::string_view::npos) << status;
  EXPECT_FALSE(KernelId::FromBytes("short").ok());
}

}  // namespace
}  // namespace kcache
