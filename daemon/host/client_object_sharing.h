// kcached --share-client-objects: its object cache (baked stores, then the writable store)
// wrapped so that client-made objects also go to and come from the shared tier
// (daemon/objects/fleet_object_cache.h), counted in the daemon's objects.fleet_* statistics,
// with the fleet's leases for the launchers' turns.
#ifndef KCACHE_DAEMON_HOST_CLIENT_OBJECT_SHARING_H_
#define KCACHE_DAEMON_HOST_CLIENT_OBJECT_SHARING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/cache/statistics.h"
#include "daemon/host/daemon.h"
#include "daemon/objects/fleet_object_cache.h"
#include "engine/objects/object_cache.h"

namespace kcache {

// `pod` itself (no fleet leases) when options.share_client_objects is off. Else the fleet
// cache over it and its leases (--shared-lease-seconds), with the --shared URL and keys
// (errors naming the key file that is wrong); it counts in `counts`, borrowed, which must
// outlive it.
absl::StatusOr<objects::FleetObjects> ShareClientObjects(const DaemonOptions& options,
                                                         std::unique_ptr<objects::ObjectCache> pod,
                                                         Statistics* counts);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_CLIENT_OBJECT_SHARING_H_
