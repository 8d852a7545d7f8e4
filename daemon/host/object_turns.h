// kcached's launcher turns: one compile per miss (daemon/objects/compile_turns.h) over its
// object cache, counted in the objects.turn_* statistics.
#ifndef KCACHE_DAEMON_HOST_OBJECT_TURNS_H_
#define KCACHE_DAEMON_HOST_OBJECT_TURNS_H_

#include <memory>

#include "daemon/cache/statistics.h"
#include "daemon/objects/compile_turns.h"
#include "daemon/objects/memo_object_cache.h"
#include "engine/objects/object_cache.h"

namespace kcache {

// Turns over `stores` (kcached's own stores, where launchers' puts land); `memo` (may be null:
// --object-memory-max-bytes 0) is kcached's object memory, told to forget a listing when the
// fleet's entry is copied in beneath it; `leases` (may be null: no --share-client-objects). All
// borrowed, with `counts`: they must outlive the turns.
std::unique_ptr<objects::CompileTurns> NewObjectTurns(const objects::CompileTurnOptions& options,
                                                      objects::ObjectCache* stores,
                                                      objects::MemoObjectCache* memo,
                                                      objects::FleetCompileLeases* leases,
                                                      Statistics* counts);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_OBJECT_TURNS_H_
