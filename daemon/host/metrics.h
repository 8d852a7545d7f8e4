// Prometheus metrics: the artifact cache's snapshot rendered in the Prometheus text exposition
// format (version 0.0.4), served on the probe port's /metrics. Every numbered counter of
// daemon/cache/statistics.h maps to one sample of one metric family (a family groups the
// counters that differ by a label: tier, rule, reason); docs/metrics.md lists them.
#ifndef KCACHE_DAEMON_HOST_METRICS_H_
#define KCACHE_DAEMON_HOST_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/cache/cache_types.h"
#include "daemon/cache/statistics.h"
#include "daemon/cache/uncached_options.h"

namespace kcache {

inline constexpr absl::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Where a numbered statistic goes: `family{label="label_value"}`, value divided by `divisor`.
struct MetricMapping {
  Statistic statistic;
  absl::string_view family;       // "kcache_resolve_hits_total"
  absl::string_view family_help;  // the family's HELP line (its first mapping's is used)
  absl::string_view label;        // "" for none
  absl::string_view label_value;
  double divisor = 1;  // 1e6 for the microsecond counters exported as seconds
};
// One mapping per statistic, in number order (kMetricMappings[i].statistic == i + 1).
const MetricMapping& MetricMappingOf(Statistic statistic);

// What the daemon knows beside the cache.
struct DaemonMetrics {
  std::string version;          // "0.1.0"
  std::string toolkit;          // the compiling toolkit's name, "" in serve-only mode
  int64_t start_time_unix = 0;  // seconds since the epoch
  int64_t calls_in_flight = 0;
  int64_t calls_in_flight_limit = 0;  // --max-calls-in-flight
  uint64_t queued_bytes = 0;          // payload reserved by Resolve writes in flight
  uint64_t queued_bytes_limit = 0;    // --queued-max-bytes, in bytes
  uint64_t object_memory_bytes =
      0;  // launchers' listings and objects held (--object-memory-max-bytes)
  // Launcher commands run uncached by reason and option (daemon/cache/uncached_options.h).
  std::vector<UncachedOptionCount> uncached_options;
  bool serving = true;  // false while shutting down
  // Accepts put off for want of descriptors or memory (daemon/service/accept_rules.h), by
  // socket: the unix --listen socket, the probe port, the fast path, the Redis door.
  uint64_t accept_failures_main = 0;
  uint64_t accept_failures_probe = 0;
  uint64_t accept_failures_fast = 0;
  uint64_t accept_failures_door = 0;
};

// The whole exposition: counters, gauges (memory, stores, tiers up), histograms.
std::string RenderMetrics(const CacheSnapshot& snapshot, const DaemonMetrics& daemon);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_METRICS_H_
