// The start-up warm (docs/kcached.md, "Start-up"): one pass, in the background once kcached
// serves, over the stores' most recently used artifacts, so that the first workers after a
// start find what a memory hit finds: RocksDB's files open and their blocks read, the code of
// a store hit run once, and (through `each`) the fast path's arena pages in place holding
// the bytes. It reads through the same verified reads as a store hit and changes nothing a
// request sees: an artifact is served only by a request that asks for it, by the serving
// rules, with its bytes as stored.
#ifndef KCACHE_DAEMON_CACHE_STARTUP_WARM_H_
#define KCACHE_DAEMON_CACHE_STARTUP_WARM_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "core/artifact.h"
#include "daemon/cache/cache_types.h"
#include "daemon/cache/store_tiers.h"

namespace kcache {

// Lists every tier's artifacts (cubins and PTX: what a resolve serves), most recently used
// first (an artifact held by several tiers counts once, from the upper one), and reads them
// in that order while their payloads fit `budget_bytes`, with their kernel's record and
// listing. Each artifact read is handed to `each` (may be empty). Stops early when
// `keep_going` answers false (checked before each read). A tier that fails is skipped.
StartupWarmResult WarmFromStores(HealthCheckedTiers& tiers, uint64_t budget_bytes,
                                 const std::function<void(std::shared_ptr<const Artifact>)>& each,
                                 const std::function<bool()>& keep_going);

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_STARTUP_WARM_H_
