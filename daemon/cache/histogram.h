// LatencyHistogram: a lock-free histogram of durations over fixed bucket bounds, cheap enough
// for every Resolve (one relaxed atomic add per bucket and sum). Read as a HistogramValue for
// metrics: per-bucket counts (not cumulative), the count and the sum.
#ifndef KCACHE_DAEMON_CACHE_HISTOGRAM_H_
#define KCACHE_DAEMON_CACHE_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace kcache {

// Upper bounds of the buckets in seconds, from 50 µs (a memory hit through the socket) to
// 5 minutes (a compile of a CUB-heavy kernel for a long target list). Values above the last
// bound land in the implicit +Inf bucket.
inline constexpr std::array<double, 20> kLatencyBoundsSeconds = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,     0.25,   0.5,     1,      2.5,   5,      10,    30,   60,    300};

struct HistogramValue {
  std::string name;              // "resolve.seconds"
  std::string help;              // one line
  std::string label;             // label name ("tier"), or "" for none
  std::string label_value;       // "memory"
  std::vector<double> bounds;    // upper bounds, seconds, ascending
  std::vector<uint64_t> counts;  // per bucket, bounds.size() + 1 (the last is +Inf)
  uint64_t count = 0;            // observations (the sum of counts)
  double sum_seconds = 0;
};

// Thread-safe; Record never blocks. A reader may see a count and a sum that differ by the
// observations being recorded at that instant (as every Prometheus client library does).
class LatencyHistogram {
 public:
  void Record(absl::Duration duration);

  // The values, with the names given.
  HistogramValue Read(std::string name, std::string help, std::string label,
                      std::string label_value) const;

 private:
  std::array<std::atomic<uint64_t>, kLatencyBoundsSeconds.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_nanos_{0};
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_HISTOGRAM_H_
