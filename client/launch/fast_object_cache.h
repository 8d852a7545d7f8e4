// The object cache through kcached's in-pod fast path (docs/protocol.md, "The fast path":
// list_objects and get_object), for kcache-launch: lookups only, no gRPC. The listing and the
// bundle are read from the daemon's arena, their XXH3-64 checksums verified, and copied out.
#ifndef KCACHE_CLIENT_LAUNCH_FAST_OBJECT_CACHE_H_
#define KCACHE_CLIENT_LAUNCH_FAST_OBJECT_CACHE_H_

#include <functional>
#include <memory>
#include <string>

#include "client/launch/cache_budget.h"
#include "client/lib/fast_path.h"
#include "core/compiler_command.h"
#include "core/protocol.h"
#include "engine/objects/object_cache.h"

namespace kcache::launch {

// Over `fast` (a connection to the daemon's fast socket, client::FastSocketFor of its address;
// shared with UncachedNotes). Never waits at creation; List and Get take their time from
// `budget` (the command's, cache_budget.h) and are refused once it is spent. Every failure (no
// daemon, a refusal, a damaged answer, a time-out) is an error the launcher treats as a miss.
// Put, ListAll and the rest are Unimplemented: they are gRPC's.
std::unique_ptr<objects::ObjectCache> NewFastObjectCache(std::shared_ptr<client::FastPath> fast,
                                                         std::shared_ptr<CacheBudget> budget);

// LauncherOptions::note_uncached over `fast`: tells kcached of each command run uncached
// (objects.uncached_<reason>, and the option that decided it), not waiting for it (at most
// 100 ms of `budget` to send it); nothing when the fast path is away or the budget spent.
std::function<void(UncachedReason, absl::string_view)> UncachedNotes(
    std::shared_ptr<client::FastPath> fast, std::shared_ptr<CacheBudget> budget);

// Tells kcached at `server` (KCACHE_SERVER) how `kcache run` routed the CUDA driver stand-in
// (FastRequest.note_cuda_stand_in: run.cuda_stand_in_*), taking at most 100 ms; nothing for
// kNotRouted, or when `server` has no fast socket.
void TellCudaStandInStart(const std::string& server, StandInStart start);

// A connection (not dialled yet) to the fast socket of `server` (KCACHE_SERVER) when it is a
// unix socket whose fast socket exists; null otherwise.
std::shared_ptr<client::FastPath> FastPathTo(const std::string& server);

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_FAST_OBJECT_CACHE_H_
