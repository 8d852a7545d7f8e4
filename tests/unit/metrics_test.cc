// RenderMetrics (daemon/host/metrics.h) and LatencyHistogram (daemon/cache/histogram.h):
// the exposition is well formed for a Prometheus parser, every statistic has its sample, and
// values and labels come out as they went in.
#include "daemon/host/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "daemon/cache/histogram.h"
#include "daemon/cache/statistics.h"

namespace kcache {
namespace {

// What the daemon knows beside the cache, as these tests give it.
DaemonMetrics TestDaemon(const std::string& toolkit) {
  DaemonMetrics daemon;
  daemon.version = "0.1.0";
  daemon.toolkit = toolkit;
  daemon.start_time_unix = 1;
  daemon.calls_in_flight_limit = 1;
  return daemon;
}

CacheSnapshot SnapshotOf(const Statistics& stats) {
  CacheSnapshot snapshot;
  snapshot.counters = stats.Values();
  snapshot.histograms = stats.Histograms();
  StoreSnapshot local;
  local.path = "/var/lib/kcache";
  local.tier = CacheTier::kLocalStore;
  local.stats_ok = true;
  local.artifacts = 12;
  StoreSnapshot baked;
  baked.path = "/opt/kcache/store";
  baked.tier = CacheTier::kBakedStore;
  baked.available = false;  // switched off after failures
  baked.stats_ok = true;
  snapshot.stores = {local, baked};
  return snapshot;
}

std::string Render(const Statistics& stats) {
  return RenderMetrics(SnapshotOf(stats), TestDaemon("NVRTC 13.0"));
}

// The family a sample belongs to ("x_bucket" of histogram "x" belongs to "x").
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::EndsWith(name, suffix)) {
      std::string base = name.substr(0, name.size() - strlen(suffix));
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

// Checks the text format's rules a scraper relies on; returns the problems found.
std::vector<std::string> FormatProblems(const std::string& text) {
  std::vector<std::string> problems;
  std::map<std::string, std::string> types;
  std::set<std::string> finished;  // families whose samples ended (they must not come back)
  std::string current;
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$)");
  const std::regex label(R"re(^[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"$)re");
  if (!absl::EndsWith(text, "\n")) problems.push_back("no final newline");
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::string l(line);
    if (absl::StartsWith(l, "# HELP ")) continue;
    if (absl::StartsWith(l, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(l, ' ');
      if (parts.size() != 4) {
        problems.push_back("bad TYPE: " + l);
        continue;
      }
      if (types.count(parts[2])) problems.push_back("TYPE twice: " + parts[2]);
      types[parts[2]] = parts[3];
      continue;
    }
    std::smatch m;
    if (!std::regex_match(l, m, sample)) {
      problems.push_back("bad sample line: " + l);
      continue;
    }
    std::string family = FamilyOf(m[1], types);
    if (!types.count(family)) problems.push_back("sample before its TYPE: " + l);
    if (family != current) {
      if (finished.count(family)) problems.push_back("family split: " + family);
      if (!current.empty()) finished.insert(current);
      current = family;
    }
    if (types[family] == "counter" && !absl::EndsWith(family, "_total")) {
      problems.push_back("counter without _total: " + family);
    }
    if (m[3].matched) {
      // Split on commas between labels (values here hold no commas).
      for (absl::string_view pair : absl::StrSplit(std::string(m[3]), ',')) {
        if (!std::regex_match(std::string(pair), label)) {
          problems.push_back("bad label: " + std::string(pair));
        }
      }
    }
    try {
      std::string value = m[4];
      if (value != "+Inf") std::stod(value);
    } catch (...) {
      problems.push_back("bad value: " + l);
    }
  }
  return problems;
}

TEST(MetricsTest, ExpositionIsWellFormed) {
  Statistics stats;
  stats.Add(Statistic::kHitMemory, 3);
  stats.RecordResolve(ResolveOutcome::kMemory, absl::Microseconds(80));
  stats.RecordCompile(absl::Seconds(2));
  std::string text = Render(stats);
  std::vector<std::string> problems = FormatProblems(text);
  EXPECT_TRUE(problems.empty()) << problems.front() << "\n" << text;
}

TEST(MetricsTest, FormatCheckerCatchesBrokenText) {                 // the check above can fail
  EXPECT_FALSE(FormatProblems("kcache_x_total 1\n").empty());       // no TYPE
  EXPECT_FALSE(FormatProblems("# TYPE a counter\na 1\n").empty());  // counter not _total
  EXPECT_FALSE(FormatProblems("# TYPE a_total counter\n# TYPE b gauge\na_total 1\nb 1\na_total 2\n")
                   .empty());                                            // split family
  EXPECT_FALSE(FormatProblems("# TYPE g gauge\ng{x=\"1} 1\n").empty());  // bad label
}

TEST(MetricsTest, EveryStatisticHasOneSample) {
  Statistics stats;
  for (const StatisticInfo& info : kStatisticInfo) {
    stats.Add(info.id, 1000000 + static_cast<int>(info.id));
  }
  std::string text = Render(stats);
  std::set<std::string> series;
  for (const StatisticInfo& info : kStatisticInfo) {
    const MetricMapping& m = MetricMappingOf(info.id);
    EXPECT_EQ(m.statistic, info.id);
    EXPECT_TRUE(absl::StartsWith(m.family, "kcache_")) << m.family;
    std::string name(m.family);
    if (!m.label.empty())
      name += "{" + std::string(m.label) + "=\"" + std::string(m.label_value) + "\"}";
    EXPECT_TRUE(series.insert(name).second) << "two statistics on " << name;
    double expected = (1000000.0 + static_cast<int>(info.id)) / m.divisor;
    std::ostringstream line;
    line.precision(9);
    line << "\n" << name << " " << expected << "\n";
    EXPECT_TRUE(absl::StrContains(text, line.str())) << info.name << ": " << line.str();
  }
}

TEST(MetricsTest, MicrosecondCountersAreSeconds) {
  Statistics stats;
  stats.Add(Statistic::kCompileMicros, 2500000);
  stats.Add(Statistic::kCompileMicrosSaved, 125);
  std::string text = Render(stats);
  EXPECT_TRUE(absl::StrContains(text, "\nkcache_compile_seconds_total 2.5\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nkcache_compile_seconds_saved_total 0.000125\n")) << text;
  // Prometheus counts time in seconds: every statistic kept in microseconds is exported so.
  for (const StatisticInfo& info : kStatisticInfo) {
    if (!absl::StrContains(info.name, "micros")) continue;
    const MetricMapping& m = MetricMappingOf(info.id);
    EXPECT_EQ(m.divisor, 1e6) << info.name;
    EXPECT_TRUE(absl::StrContains(m.family, "_seconds")) << info.name << ": " << m.family;
  }
}

TEST(MetricsTest, StoresAreLabelledAndFailingTiersAreDown) {
  std::string text = Render(Statistics());
  EXPECT_TRUE(absl::StrContains(
      text, "\nkcache_store_artifacts{store=\"/var/lib/kcache\",role=\"writable\"} 12\n"))
      << text;
  EXPECT_TRUE(
      absl::StrContains(text, "\nkcache_store_up{store=\"/var/lib/kcache\",role=\"writable\"} 1\n"))
      << text;
  EXPECT_TRUE(
      absl::StrContains(text, "\nkcache_store_up{store=\"/opt/kcache/store\",role=\"baked\"} 0\n"))
      << text;
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  CacheSnapshot snapshot = SnapshotOf(Statistics());
  snapshot.stores[0].path = "/odd\"dir\\with\nnewline";
  std::string text = RenderMetrics(snapshot, TestDaemon(""));
  EXPECT_TRUE(absl::StrContains(text, "store=\"/odd\\\"dir\\\\with\\nnewline\"")) << text;
  std::vector<std::string> problems = FormatProblems(text);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

// Launcher commands run uncached by option: one sample per pair, the option a label value
// like any other (a client's name with a quote is escaped).
TEST(MetricsTest, UncachedCommandsByOptionAreOneFamily) {
  DaemonMetrics daemon = TestDaemon("");
  daemon.uncached_options = {{UncachedReason::kUnknownOption, "-fmade\"up", 3},
                             {UncachedReason::kProfiling, "-fplugin", 1}};
  std::string text = RenderMetrics(SnapshotOf(Statistics()), daemon);
  EXPECT_TRUE(absl::StrContains(text,
                                "\nkcache_launcher_uncached_option_total{reason=\"unknown_option\","
                                "option=\"-fmade\\\"up\"} 3\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text,
      "\nkcache_launcher_uncached_option_total{reason=\"profiling\",option=\"-fplugin\"} 1\n"))
      << text;
  std::vector<std::string> problems = FormatProblems(text);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndEndAtTheCount) {
  Statistics stats;
  stats.RecordResolve(ResolveOutcome::kCompile, absl::Milliseconds(400));
  stats.RecordResolve(ResolveOutcome::kCompile, absl::Seconds(3));
  stats.RecordResolve(ResolveOutcome::kCompile, absl::Minutes(10));  // past the last bound
  std::string text = Render(stats);
  const std::string prefix = "kcache_resolve_duration_seconds_bucket{outcome=\"compile\",le=\"";
  EXPECT_TRUE(absl::StrContains(text, prefix + "0.25\"} 0\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, prefix + "0.5\"} 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, prefix + "5\"} 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, prefix + "300\"} 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, prefix + "+Inf\"} 3\n")) << text;
  EXPECT_TRUE(
      absl::StrContains(text, "\nkcache_resolve_duration_seconds_count{outcome=\"compile\"} 3\n"))
      << text;
  EXPECT_TRUE(
      absl::StrContains(text, "\nkcache_resolve_duration_seconds_sum{outcome=\"compile\"} 603.4\n"))
      << text;
}

TEST(LatencyHistogramTest, ABoundIsInclusive) {
  LatencyHistogram h;
  h.Record(absl::Microseconds(50));  // == the first bound
  h.Record(absl::Microseconds(51));  // the second bucket
  h.Record(absl::Milliseconds(1));   // == the 0.001 bound
  h.Record(absl::ZeroDuration());    // the first bucket
  h.Record(-absl::Seconds(1));       // a clock step backwards: first bucket, adds 0
  HistogramValue v = h.Read("x", "help", "", "");
  ASSERT_EQ(v.counts.size(), kLatencyBoundsSeconds.size() + 1);
  EXPECT_EQ(v.counts[0], 3u);
  EXPECT_EQ(v.counts[1], 1u);
  EXPECT_EQ(v.bounds[4], 0.001);
  EXPECT_EQ(v.counts[4], 1u);
  EXPECT_EQ(v.count, 5u);
  EXPECT_NEAR(v.sum_seconds, 0.00005 + 0.000051 + 0.001, 1e-12);
}

}  // namespace
}  // namespace kcache
