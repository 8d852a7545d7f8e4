// kcached's counts of launcher commands run uncached, for every UncachedReason
// (core/compiler_command.h): the statistic objects.uncached_<name> (docs/statistics.md) and the
// sample kcache_launcher_uncached_total{reason="<name>"} (docs/metrics.md), named by
// UncachedReasonName alone. The note that carries a reason over the fast path is tested in
// tests/integration/hostile_fast_path_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/compiler_command.h"
#include "daemon/cache/artifact_cache.h"
#include "daemon/cache/statistics.h"
#include "daemon/host/metrics.h"
#include "engine/store/store.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

using ::kcache::testing::TempDir;

UncachedReason Reason(int r) { return static_cast<UncachedReason>(r); }

std::string StatisticName(int r) {
  return absl::StrCat("objects.uncached_", UncachedReasonName(Reason(r)));
}

std::string ReadDoc(const std::string& name) {
  std::ifstream in(testing::SourcePath("docs/" + name));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(UncachedCountersTest, EachReasonCountsUnderObjectsUncachedItsName) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(dir / "store");
  ASSERT_TRUE(store.ok()) << store.status();
  // As kcached's host does: the statistics are its own, shared with the cache (whose snapshot
  // reports them) and with the fast path (which counts the launchers' notes in them).
  auto stats = std::make_shared<Statistics>();
  CacheOptions options;
  options.local = *std::move(store);
  options.statistics = stats;
  absl::StatusOr<std::unique_ptr<ArtifactCache>> cache = NewArtifactCache(std::move(options));
  ASSERT_TRUE(cache.ok()) << cache.status();
  for (int r = 1; r < kUncachedReasonCount; ++r) {  // reason r is told r times
    for (int i = 0; i < r; ++i) stats->Add(UncachedStatistic(Reason(r)));
  }
  std::map<std::string, uint64_t> counters;
  uint64_t uncached = 0;
  for (const CounterValue& c : (*cache)->Snapshot().counters) {
    counters[c.name] = c.value;
    if (absl::StartsWith(c.name, "objects.uncached_")) uncached += c.value;
  }
  const std::string doc = ReadDoc("statistics.md");
  ASSERT_FALSE(doc.empty());
  uint64_t told = 0;
  for (int r = 1; r < kUncachedReasonCount; ++r) {
    const std::string name = StatisticName(r);
    const int number = static_cast<int>(UncachedStatistic(Reason(r)));
    EXPECT_EQ(kStatisticInfo[number - 1].name, name);
    EXPECT_EQ(kStatisticInfo[number - 1].help,
              absl::StrCat("launcher commands run uncached: ", UncachedReasonName(Reason(r)),
                           " (docs/torch-extensions.md)"));
    ASSERT_EQ(counters.count(name), 1u) << name;
    EXPECT_EQ(counters[name], static_cast<uint64_t>(r)) << name;
    EXPECT_TRUE(absl::StrContains(doc, absl::StrCat("| ", number, " | `", name, "` |")))
        << "docs/statistics.md does not list " << number << " " << name;
    told += r;
  }
  EXPECT_EQ(uncached, told);  // no objects.uncached_* beside the reasons
}

TEST(UncachedCountersTest, EachReasonIsALabelOfTheLauncherUncachedMetric) {
  Statistics stats;
  for (int r = 1; r < kUncachedReasonCount; ++r) stats.Add(UncachedStatistic(Reason(r)), 100 + r);
  CacheSnapshot snapshot;
  snapshot.counters = stats.Values();
  const std::string text = RenderMetrics(snapshot, DaemonMetrics{});
  for (int r = 1; r < kUncachedReasonCount; ++r) {
    const std::string sample = absl::StrCat("\nkcache_launcher_uncached_total{reason=\"",
                                            UncachedReasonName(Reason(r)), "\"} ", 100 + r, "\n");
    EXPECT_TRUE(absl::StrContains(text, sample)) << sample << "is not in\n" << text;
  }
  // docs/metrics.md's row of the family names reasons (the first ones, "…", the last) and
  // the statistics behind it.
  std::string row;
  for (absl::string_view line : absl::StrSplit(ReadDoc("metrics.md"), '\n')) {
    if (absl::StartsWith(line, "| `kcache_launcher_uncached_total` |")) row = std::string(line);
  }
  ASSERT_FALSE(row.empty()) << "docs/metrics.md has no row for kcache_launcher_uncached_total";
  EXPECT_TRUE(absl::StrContains(row, "`objects.uncached_*`")) << row;
  std::vector<std::string> cells = absl::StrSplit(row, '|');
  ASSERT_GE(cells.size(), 3u) << row;
  const std::string& labels = cells[2];  // "`reason`: `not_a_compile`, … `native_target` (…)"
  std::vector<std::string> named;
  std::vector<std::string> quoted = absl::StrSplit(labels, '`');
  for (size_t i = 1; i + 1 < quoted.size(); i += 2) named.push_back(quoted[i]);
  ASSERT_GE(named.size(), 3u) << row;
  EXPECT_EQ(named.front(), "reason") << row;  // the label, then its values
  for (size_t i = 1; i < named.size(); ++i) {
    const std::string& name = named[i];
    bool is_reason = false;
    for (int r = 1; r < kUncachedReasonCount; ++r) {
      is_reason |= UncachedReasonName(Reason(r)) == name;
    }
    EXPECT_TRUE(is_reason) << name << " in docs/metrics.md is no UncachedReason";
  }
  EXPECT_EQ(named.back(), UncachedReasonName(Reason(kUncachedReasonCount - 1)))
      << "docs/metrics.md's row should end with the last reason: " << row;
}

}  // namespace
}  // namespace kcache
