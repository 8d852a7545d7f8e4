// The object cache through kcached (`--server ADDR`, KCACHE_SERVER): the ObjectCache
// interface over the ObjectCache gRPC service (proto/kcache/v1/kcache.proto).
#ifndef KCACHE_CLIENT_CLI_OBJECT_REMOTE_H_
#define KCACHE_CLIENT_CLI_OBJECT_REMOTE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/objects/object_cache.h"

namespace kcache::cli {

// Never waits at creation; each call gives up after a short deadline (a dead kcached costs a
// launcher about a second, then it compiles uncached).
absl::StatusOr<std::unique_ptr<objects::ObjectCache>> OpenRemoteObjectCache(
    const std::string& address);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_OBJECT_REMOTE_H_
