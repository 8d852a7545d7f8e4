// UncachedOptionCounts: launcher commands run uncached, counted by reason and option, in a
// table bounded by its limit whatever clients send.
#include "daemon/cache/uncached_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

using U = UncachedReason;

TEST(UncachedOptionCountsTest, CountsEachReasonAndOptionMostCountedFirst) {
  UncachedOptionCounts counts;
  counts.Add(U::kUnknownOption, "-fmade-up");
  counts.Add(U::kProfiling, "-fplugin");
  counts.Add(U::kProfiling, "-fplugin");
  counts.Add(U::kUnknownOption, "-fplugin");  // another reason: its own row
  counts.Add(U::kNotACompile, "");            // no option decided: not in the table
  std::vector<UncachedOptionCount> rows = counts.Snapshot();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].reason, U::kProfiling);
  EXPECT_EQ(rows[0].option, "-fplugin");
  EXPECT_EQ(rows[0].count, 2u);
  EXPECT_EQ(rows[1].count, 1u);
  EXPECT_EQ(rows[2].count, 1u);
}

TEST(UncachedOptionCountsTest, PastTheLimitOptionsCountAsOthers) {
  UncachedOptionCounts counts;
  counts.SetLimit(2);
  for (int i = 0; i < 10; ++i) counts.Add(U::kUnknownOption, absl::StrCat("-o", i));
  counts.Add(U::kUnknownOption, "-o0");  // kept before the limit: still counted as itself
  std::vector<UncachedOptionCount> rows = counts.Snapshot();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].option, UncachedOptionCounts::kOthers);
  EXPECT_EQ(rows[0].count, 8u);
  EXPECT_EQ(rows[1].option, "-o0");
  EXPECT_EQ(rows[1].count, 2u);
  counts.SetLimit(0);
  counts.Add(U::kKeepTemps, "-save-temps");
  EXPECT_EQ(counts.Snapshot().size(), 4u);  // (others) of keep_temps
}

TEST(UncachedOptionCountsTest, NamesAreCutAndMadePrintable) {
  UncachedOptionCounts counts;
  counts.Add(U::kUnknownOption, std::string("-a\nb\"c\x01") + std::string(500, 'x'));
  std::vector<UncachedOptionCount> rows = counts.Snapshot();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].option.size(), UncachedOptionCounts::kMaxOptionBytes);
  EXPECT_EQ(rows[0].option.substr(0, 6), "-a?b\"c");
  EXPECT_EQ(rows[0].option[6], '?');
}

}  // namespace
}  // namespace kcache
