// kcached --share-client-objects: its object cache (baked stores, then the writable store)
// wrapped so that client-made objects also go to and come from the shared tier
// (engine/objects/fleet_object_cache.h), counted in the cache's objects.fleet_* statistics.
#ifndef KCACHE_DAEMON_HOST_CLIENT_OBJECT_SHARING_H_
#define KCACHE_DAEMON_HOST_CLIENT_OBJECT_SHARING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/cache/artifact_cache.h"
#include "daemon/host/daemon.h"
#include "engine/objects/object_cache.h"

namespace kcache {

// `pod` itself when options.share_client_objects is off. Else the fleet cache over it, with
// the --shared URL and keys (errors naming the key file that is wrong); `*counts` is read at
// each count (it is set after this returns, before requests come) and must outlive the cache.
absl::StatusOr<std::unique_ptr<objects::ObjectCache>> ShareClientObjects(
    const DaemonOptions& options, std::unique_ptr<objects::ObjectCache> pod,
    const std::unique_ptr<ArtifactCache>* counts);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_CLIENT_OBJECT_SHARING_H_
