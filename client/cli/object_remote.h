// The object cache through kcached (`--server ADDR`, KCACHE_SERVER): the ObjectCache
// interface over the ObjectCache gRPC service (proto/kcache/v1/objects.proto).
#ifndef KCACHE_CLIENT_CLI_OBJECT_REMOTE_H_
#define KCACHE_CLIENT_CLI_OBJECT_REMOTE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/launch/cache_budget.h"
#include "engine/objects/object_cache.h"

namespace kcache::cli {

// Never waits at creation. With `budget` (a launcher command's, client/launch/cache_budget.h)
// every call takes its deadline from it (a put and a get also the TransferTime of their
// bytes), is refused once it is spent (DeadlineExceeded), and tells it whether kcached
// answered: a hung kcached costs the command at most the budget. Without, a listing gives up
// after 5 s and a transfer after 60 s (the `kcache` commands that list or export objects).
// Not thread-safe (it notes the sizes its listings gave, and `budget` is not): one command's.
// `listed`: sizes of entries listed before it was opened (a handed-over lookup's), for their
// gets' transfer time.
absl::StatusOr<std::unique_ptr<objects::ObjectCache>> OpenRemoteObjectCache(
    const std::string& address, std::shared_ptr<launch::CacheBudget> budget = nullptr,
    launch::ListedSizes listed = {});

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_OBJECT_REMOTE_H_
