#include "daemon/host/client_object_sharing.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "engine/shared/redis_cluster.h"
#include "engine/shared/redis_lease.h"
#include "engine/shared/shared_entry.h"

namespace kcache {
namespace {

// The objects.fleet_* statistic that counts `what`.
Statistic CountOf(objects::FleetObjectCount what) {
  using Fleet = objects::FleetObjectCount;
  switch (what) {
    case Fleet::kHit:
      return Statistic::kObjectFleetHits;
    case Fleet::kMiss:
      return Statistic::kObjectFleetMisses;
    case Fleet::kPut:
      return Statistic::kObjectFleetPuts;
    case Fleet::kRefused:
      return Statistic::kObjectFleetRefused;
    case Fleet::kError:
      return Statistic::kObjectFleetErrors;
    case Fleet::kWriteDropped:
      break;
  }
  return Statistic::kObjectFleetWritesDropped;
}

}  // namespace

absl::StatusOr<objects::FleetObjects> ShareClientObjects(const DaemonOptions& options,
                                                         std::unique_ptr<objects::ObjectCache> pod,
                                                         Statistics* counts) {
  if (!options.share_client_objects) return objects::FleetObjects{std::move(pod), nullptr};
  objects::FleetObjectOptions fleet;
  absl::StatusOr<SharedKeys> keys =
      SharedKeys::Load(options.shared_key_file, options.shared_key_file_second);
  if (!keys.ok()) return keys.status();
  fleet.keys = *std::move(keys);
  fleet.max_object_bytes = options.objects.max_object_bytes;
  fleet.budget = options.shared_budget;
  RedisOptions redis_options;
  redis_options.call_deadline = fleet.write_deadline;
  absl::StatusOr<std::unique_ptr<RedisCluster>> redis =
      RedisCluster::Create(options.shared, redis_options);
  if (!redis.ok()) return redis.status();
  absl::StatusOr<std::unique_ptr<RedisCluster>> leaser =
      RedisCluster::Create(options.shared, redis_options);
  if (!leaser.ok()) return leaser.status();
  RedisLeaseOptions lease_options;
  lease_options.ttl = options.shared_lease;
  lease_options.call_budget = options.shared_budget;
  lease_options.release_deadline = fleet.write_deadline;
  auto leases = std::make_unique<RedisLeases>(
      *std::move(leaser), lease_options,
      [counts](const absl::Status&) { counts->Add(Statistic::kObjectFleetErrors); });
  spdlog::warn(
      "--share-client-objects: objects clients build are shared through {} with every kcached "
      "that opts in, and theirs are served here",
      options.shared);
  auto count = [counts](objects::FleetObjectCount what) { counts->Add(CountOf(what)); };
  return objects::NewFleetObjectCache(std::move(pod), *std::move(redis), std::move(leases),
                                      std::move(fleet), std::move(count));
}

}  // namespace kcache
