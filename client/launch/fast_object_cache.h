// The object cache through kcached's in-pod fast path (docs/protocol.md, "The fast path":
// list_objects and get_object), for kcache-launch: lookups only, no gRPC. The listing and the
// bundle are read from the daemon's arena, their XXH3-64 checksums verified, and copied out.
#ifndef KCACHE_CLIENT_LAUNCH_FAST_OBJECT_CACHE_H_
#define KCACHE_CLIENT_LAUNCH_FAST_OBJECT_CACHE_H_

#include <memory>
#include <string>

#include "engine/objects/object_cache.h"

namespace kcache::launch {

// Over the fast socket `fast_socket` (client::FastSocketFor of the daemon's address). Never
// waits at creation; List and Get give up after a short deadline. Every failure (no daemon, a
// refusal, a damaged answer) is an error the launcher treats as a miss. Put, ListAll and the
// rest are Unimplemented: they are gRPC's.
std::unique_ptr<objects::ObjectCache> NewFastObjectCache(std::string fast_socket);

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_FAST_OBJECT_CACHE_H_
