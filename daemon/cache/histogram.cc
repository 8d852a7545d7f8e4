#include "daemon/cache/histogram.h"

#include <algorithm>
#include <utility>

namespace kcache {

void LatencyHistogram::Record(absl::Duration duration) {
  double seconds = absl::ToDoubleSeconds(duration);
  size_t bucket =
      std::lower_bound(kLatencyBoundsSeconds.begin(), kLatencyBoundsSeconds.end(), seconds) -
      kLatencyBoundsSeconds.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  int64_t nanos = absl::ToInt64Nanoseconds(duration);
  sum_nanos_.fetch_add(nanos > 0 ? static_cast<uint64_t>(nanos) : 0, std::memory_order_relaxed);
}

HistogramValue LatencyHistogram::Read(std::string name, std::string help, std::string label,
                                      std::string label_value) const {
  HistogramValue value;
  value.name = std::move(name);
  value.help = std::move(help);
  value.label = std::move(label);
  value.label_value = std::move(label_value);
  value.bounds.assign(kLatencyBoundsSeconds.begin(), kLatencyBoundsSeconds.end());
  value.counts.reserve(buckets_.size());
  for (const std::atomic<uint64_t>& bucket : buckets_) {
    value.counts.push_back(bucket.load(std::memory_order_relaxed));
    value.count += value.counts.back();
  }
  value.sum_seconds = static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) * 1e-9;
  return value;
}

}  // namespace kcache
