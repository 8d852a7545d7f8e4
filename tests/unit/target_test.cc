// Targets and device SMs as written on the command line and in stores: parsing, the canonical
// spelling, lists, and validation against a toolkit's supported architectures.
#include "core/target.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace kcache {
namespace {

// nvrtcGetSupportedArchs of CUDA 13.0.
const std::vector<int> kCuda13Archs = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
constexpr absl::string_view kToolkit = "NVRTC 13.0";

Target Sass(int major, int minor, ArchVariant variant = ArchVariant::kNone) {
  return Target{TargetKind::kSass, Sm{major, minor}, variant};
}
Target Ptx(int major, int minor, ArchVariant variant = ArchVariant::kNone) {
  return Target{TargetKind::kPtx, Sm{major, minor}, variant};
}

testing::AssertionResult MessageHas(const absl::Status& status, absl::string_view needle) {
  if (absl::StrContains(status.message(), needle)) {
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure()
         << "message \"" << status.message() << "\" lacks \"" << needle << "\"";
}

// Every CUDA 13 target: plain, `a` (9.0 and later) and `f` (10.0 and later), SASS and PTX.
std::vector<Target> AllCuda13Targets() {
  std::vector<Target> targets;
  for (int arch : kCuda13Archs) {
    const Sm sm = SmFromArch(arch);
    for (TargetKind kind : {TargetKind::kSass, TargetKind::kPtx}) {
      targets.push_back(Target{kind, sm, ArchVariant::kNone});
      if (arch >= 90) targets.push_back(Target{kind, sm, ArchVariant::kArchSpecific});
      if (arch >= 100) targets.push_back(Target{kind, sm, ArchVariant::kFamily});
    }
  }
  return targets;
}

TEST(ParseTargetTest, AcceptsDottedAndCanonicalSpellings) {
  struct Case {
    absl::string_view text;
    Target want;
  };
  const Case cases[] = {
      {"7.5", Sass(7, 5)},
      {"sm_75", Sass(7, 5)},
      {"9.0a", Sass(9, 0, ArchVariant::kArchSpecific)},
      {"sm_90a", Sass(9, 0, ArchVariant::kArchSpecific)},
      {"10.0f", Sass(10, 0, ArchVariant::kFamily)},
      {"sm_100f", Sass(10, 0, ArchVariant::kFamily)},
      {"compute_90", Ptx(9, 0)},
      {"compute_90a", Ptx(9, 0, ArchVariant::kArchSpecific)},
      {"12.1", Sass(12, 1)},
      {"sm_121", Sass(12, 1)},
      {"compute_120f", Ptx(12, 0, ArchVariant::kFamily)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Target> got = ParseTarget(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.text << " parsed as " << got->ToString();
  }
}

TEST(ParseTargetTest, RejectsMalformedTextNamingIt) {
  for (absl::string_view bad :
       {"7", "sm_", "sm_7x", "9.0b", "compute_", "sm_75 ", "75.5.1", "-1.0"}) {
    absl::StatusOr<Target> got = ParseTarget(bad);
    ASSERT_FALSE(got.ok()) << "\"" << bad << "\" parsed as " << got->ToString();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(MessageHas(got.status(), bad));
  }
  absl::StatusOr<Target> empty = ParseTarget("");
  ASSERT_FALSE(empty.ok()) << "\"\" parsed as " << empty->ToString();
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(empty.status().message().empty());
}

TEST(TargetTest, ToStringIsCanonical) {
  EXPECT_EQ(Sass(7, 5).ToString(), "sm_75");
  EXPECT_EQ(Sass(9, 0, ArchVariant::kArchSpecific).ToString(), "sm_90a");
  EXPECT_EQ(Sass(10, 0, ArchVariant::kFamily).ToString(), "sm_100f");
  EXPECT_EQ(Ptx(8, 6).ToString(), "compute_86");
  EXPECT_EQ(Ptx(12, 1, ArchVariant::kArchSpecific).ToString(), "compute_121a");
}

TEST(TargetTest, ToStringRoundTripsThroughParseTarget) {
  for (const Target& target : AllCuda13Targets()) {
    absl::StatusOr<Target> back = ParseTarget(target.ToString());
    ASSERT_TRUE(back.ok()) << target.ToString() << ": " << back.status();
    EXPECT_EQ(*back, target) << target.ToString();
  }
}

TEST(TargetTest, WithKindKeepsSmAndVariant) {
  EXPECT_EQ(Sass(9, 0, ArchVariant::kArchSpecific).WithKind(TargetKind::kPtx),
            Ptx(9, 0, ArchVariant::kArchSpecific));
  EXPECT_EQ(Ptx(8, 6).WithKind(TargetKind::kSass), Sass(8, 6));
}

TEST(SmTest, ToStringAndArch) {
  EXPECT_EQ((Sm{8, 9}).ToString(), "8.9");
  EXPECT_EQ((Sm{12, 1}).ToString(), "12.1");
  EXPECT_EQ((Sm{12, 1}).arch(), 121);
  EXPECT_EQ(SmFromArch(89), (Sm{8, 9}));
  EXPECT_EQ(SmFromArch(100), (Sm{10, 0}));
  EXPECT_EQ(SmFromArch(121), (Sm{12, 1}));
  EXPECT_LT((Sm{8, 9}), (Sm{9, 0}));
  EXPECT_LT((Sm{9, 0}), (Sm{10, 0}));
}

TEST(ParseSmTest, AcceptsDottedPrefixedAndNumericSpellings) {
  struct Case {
    absl::string_view text;
    Sm want;
  };
  const Case cases[] = {{"8.9", {8, 9}}, {"12.1", {12, 1}},   {"sm_89", {8, 9}}, {"89", {8, 9}},
                        {"7.5", {7, 5}}, {"sm_121", {12, 1}}, {"121", {12, 1}},  {"10.0", {10, 0}}};
  for (const Case& c : cases) {
    absl::StatusOr<Sm> got = ParseSm(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.text << " parsed as " << got->ToString();
  }
}

TEST(ParseSmTest, RejectsVariantsAndMalformedText) {
  for (absl::string_view bad : {"", "9.0a", "sm_90a", "10.0f", "x.y", "8.", "sm_", "8.9 "}) {
    absl::StatusOr<Sm> got = ParseSm(bad);
    EXPECT_FALSE(got.ok()) << "\"" << bad << "\" parsed as " << got->ToString();
  }
}

TEST(ParseTargetListTest, ParsesCommaSeparatedListInOrder) {
  absl::StatusOr<std::vector<Target>> got = ParseTargetList("7.5,8.6,8.9");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<Target>{Sass(7, 5), Sass(8, 6), Sass(8, 9)}));

  got = ParseTargetList("sm_90a,compute_90,10.0f");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<Target>{Sass(9, 0, ArchVariant::kArchSpecific), Ptx(9, 0),
                                       Sass(10, 0, ArchVariant::kFamily)}));

  got = ParseTargetList("8.6");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<Target>{Sass(8, 6)}));
}

TEST(ParseTargetListTest, SassAndPtxOfOneArchAreNotDuplicates) {
  absl::StatusOr<std::vector<Target>> got = ParseTargetList("sm_86,compute_86");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 2u);
}

TEST(ParseTargetListTest, RejectsDuplicates) {
  for (absl::string_view text : {"7.5,7.5", "7.5,8.6,sm_75", "9.0a,sm_90a"}) {
    absl::StatusOr<std::vector<Target>> got = ParseTargetList(text);
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  EXPECT_TRUE(MessageHas(ParseTargetList("8.6,7.5,8.6").status(), "8.6"));
}

TEST(ParseTargetListTest, RejectsEmptyItems) {
  for (absl::string_view text : {"", ",", "7.5,,8.6", "7.5,", ",7.5"}) {
    absl::StatusOr<std::vector<Target>> got = ParseTargetList(text);
    ASSERT_FALSE(got.ok()) << "\"" << text << "\"";
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(ParseTargetListTest, RejectsBadItemNamingIt) {
  absl::StatusOr<std::vector<Target>> got = ParseTargetList("7.5,9.0b,8.6");
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(MessageHas(got.status(), "9.0b"));
}

TEST(ValidateTargetTest, AcceptsEveryCuda13Target) {
  for (const Target& target : AllCuda13Targets()) {
    EXPECT_TRUE(ValidateTarget(target, kCuda13Archs, kToolkit).ok()) << target.ToString();
  }
}

TEST(ValidateTargetTest, RejectsArchBelowToolkitListingSupported) {
  const absl::Status status = ValidateTarget(Sass(7, 0), kCuda13Archs, kToolkit);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(status, "sm_70"));
  EXPECT_TRUE(MessageHas(status, kToolkit));
  EXPECT_TRUE(MessageHas(status, "7.5"));
  EXPECT_TRUE(MessageHas(status, "12.1"));

  EXPECT_FALSE(ValidateTarget(Ptx(7, 2), kCuda13Archs, kToolkit).ok());
  EXPECT_FALSE(ValidateTarget(Sass(9, 1), kCuda13Archs, kToolkit).ok());
  EXPECT_FALSE(ValidateTarget(Sass(7, 5), {}, kToolkit).ok());
}

TEST(ValidateTargetTest, ArchSpecificStartsAt90) {
  EXPECT_TRUE(ValidateTarget(Sass(9, 0, ArchVariant::kArchSpecific), kCuda13Archs, kToolkit).ok());
  EXPECT_TRUE(ValidateTarget(Ptx(9, 0, ArchVariant::kArchSpecific), kCuda13Archs, kToolkit).ok());
  const absl::Status status =
      ValidateTarget(Sass(8, 6, ArchVariant::kArchSpecific), kCuda13Archs, kToolkit);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(status, "sm_86a"));
}

TEST(ValidateTargetTest, FamilyStartsAt100) {
  EXPECT_TRUE(ValidateTarget(Sass(10, 0, ArchVariant::kFamily), kCuda13Archs, kToolkit).ok());
  const absl::Status status =
      ValidateTarget(Sass(8, 9, ArchVariant::kFamily), kCuda13Archs, kToolkit);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(status, "sm_89f"));
  EXPECT_FALSE(ValidateTarget(Sass(9, 0, ArchVariant::kFamily), kCuda13Archs, kToolkit).ok());
}

}  // namespace
}  // namespace kcache
