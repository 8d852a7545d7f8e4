// The options of the daemon's shared tier (daemon/cache/shared_tier.h), apart so that
// CacheOptions (artifact_cache.h) can hold them.
#ifndef KCACHE_DAEMON_CACHE_SHARED_TIER_OPTIONS_H_
#define KCACHE_DAEMON_CACHE_SHARED_TIER_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "engine/shared/shared_entry.h"

namespace kcache {

struct SharedTierOptions {
  std::string url;  // --shared: redis://host:port or redis-cluster://h1:p1,h2:p2
  SharedKeys keys;  // --shared-key-file (and --shared-key-file-second)
  // --shared-budget-ms: the longest one lookup (every artifact of a compile) may take.
  absl::Duration budget = absl::Milliseconds(100);
  // --shared-max-bytes: artifacts larger than this stay local (counted: shared.too_big).
  uint64_t max_value_bytes = uint64_t{8} << 20;
  size_t write_queue = 256;  // artifacts waiting to be written; past it writes are dropped
  absl::Duration write_deadline = absl::Seconds(2);  // one write, redirects included
  // Fleet-wide single-flight: a daemon that misses takes a lease on the artifact for this
  // long (--shared-lease-seconds) before compiling; the others wait for its entry, polling
  // every `poll`, for at most `wait` (--shared-wait-seconds), and compile themselves when
  // the lease expires (its holder died) or the wait is over. wait zero: no leases.
  absl::Duration lease_ttl = absl::Seconds(30);
  absl::Duration wait = absl::Seconds(60);
  absl::Duration poll = absl::Milliseconds(50);
  absl::Duration off_initial = absl::Seconds(5);
  absl::Duration off_max = absl::Minutes(1);
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_SHARED_TIER_OPTIONS_H_
