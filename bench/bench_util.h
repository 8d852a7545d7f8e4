// Small pieces the benchmarks share: timing, percentiles, the bundled manifest as sources.
#ifndef KCACHE_BENCH_BENCH_UTIL_H_
#define KCACHE_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kcache/kcache.h"

namespace kcache::bench {

using Clock = std::chrono::steady_clock;

inline double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// The p-th percentile (0..100) of `values` (sorted in place); 0 when empty.
inline double Percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p / 100.0 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

inline double Median(std::vector<double> values) { return Percentile(values, 50); }

// True when `source` declares it can run on `device` (min/max arch).
inline bool Runs(const client::KernelSource& source, const client::Device& device) {
  int arch = device.arch();
  return (source.min_arch == 0 || arch >= source.min_arch) &&
         (source.max_arch == 0 || arch <= source.max_arch);
}

}  // namespace kcache::bench

#endif  // KCACHE_BENCH_BENCH_UTIL_H_
