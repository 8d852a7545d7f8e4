// The memory tier's answers for a device whose driver is unknown (driver 0), and how one of
// them serves the same device with a known driver. The start-up warm remembers such answers
// (daemon/cache/startup_warm.h), so that the first worker after a start, whatever its driver,
// is served from memory what its own store hit would have served.
#ifndef KCACHE_DAEMON_CACHE_UNKNOWN_DRIVER_H_
#define KCACHE_DAEMON_CACHE_UNKNOWN_DRIVER_H_

#include <optional>

#include "core/compat.h"
#include "daemon/cache/memory_lru.h"

namespace kcache {

// The entry that serves `device` (its driver known, not 0), made from `unknown`: the memory
// tier's entry for the same kernel and SM with driver 0. nullopt when it does not carry over:
// the driver is 0, the entry is PTX (with a known driver a toolkit may build the SASS
// instead), or the driver cannot load its artifact.
//
// Why a carried entry is exactly what a store hit would serve (docs/serving-rules.md): with
// driver 0 no stored artifact is left out for its driver, so the entry's artifact is the best
// of every candidate for the SM; a known driver only leaves candidates out, and when it loads
// the entry's artifact that one stays in and stays the best (the ranking does not depend on
// the driver); and stored SASS is served, never compiled over, whatever the driver. The reason
// is rewritten for `device` (no "driver unknown, assumed ...").
std::optional<Answer> CarryToDriver(const Answer& unknown, const Device& device);

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_UNKNOWN_DRIVER_H_
