// Small pieces the benchmarks share: timing, percentiles, the bundled manifest as sources.
#ifndef KCACHE_BENCH_BENCH_UTIL_H_
#define KCACHE_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/manifest.h"
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

// A manifest's kernels as the client library takes them.
inline std::vector<client::KernelSource> SourcesOf(const Manifest& manifest) {
  std::vector<client::KernelSource> sources;
  for (const ManifestKernel& k : manifest.kernels) {
    client::KernelSource s;
    s.name = k.record.spec.name;
    s.source = k.record.spec.source;
    s.headers = k.record.spec.headers;
    s.options = k.record.spec.options;
    s.name_expressions = k.record.spec.name_expressions;
    s.min_arch = k.record.arch.min_arch;
    s.max_arch = k.record.arch.max_arch;
    s.want_ltoir = k.record.want_ltoir;
    sources.push_back(std::move(s));
  }
  return sources;
}

// True when `source` declares it can run on `device` (min/max arch).
inline bool Runs(const client::KernelSource& source, const client::Device& device) {
  int arch = device.arch();
  return (source.min_arch == 0 || arch >= source.min_arch) &&
         (source.max_arch == 0 || arch <= source.max_arch);
}

}  // namespace kcache::bench

#endif  // KCACHE_BENCH_BENCH_UTIL_H_
