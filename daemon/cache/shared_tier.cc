#include "daemon/cache/shared_tier.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

constexpr size_t kMaxRejectedLogged = 10000;

}  // namespace

absl::StatusOr<std::unique_ptr<SharedTier>> SharedTier::Create(SharedTierOptions options,
                                                               Statistics* stats) {
  RedisOptions read;
  read.call_deadline = options.budget;
  read.connect_timeout = std::min(read.connect_timeout, options.budget);
  read.io_timeout = std::min(read.io_timeout, options.budget);
  RedisOptions write;
  write.call_deadline = options.write_deadline;
  absl::StatusOr<std::unique_ptr<RedisCluster>> reader = RedisCluster::Create(options.url, read);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<std::unique_ptr<RedisCluster>> writer = RedisCluster::Create(options.url, write);
  if (!writer.ok()) return writer.status();
  absl::StatusOr<std::unique_ptr<RedisCluster>> leaser = RedisCluster::Create(options.url, write);
  if (!leaser.ok()) return leaser.status();
  return std::unique_ptr<SharedTier>(new SharedTier(std::move(options), *std::move(reader),
                                                    *std::move(writer), *std::move(leaser), stats));
}

namespace {

RedisLeaseOptions LeaseOptionsOf(const SharedTierOptions& options) {
  RedisLeaseOptions leases;
  leases.ttl = options.lease_ttl;
  leases.poll = options.poll;
  leases.call_budget = options.budget;
  leases.release_deadline = options.write_deadline;
  return leases;
}

}  // namespace

SharedTier::SharedTier(SharedTierOptions options, std::unique_ptr<RedisCluster> reader,
                       std::unique_ptr<RedisCluster> writer, std::unique_ptr<RedisCluster> leaser,
                       Statistics* stats)
    : options_(std::move(options)),
      reader_(std::move(reader)),
      writer_(std::move(writer)),
      stats_(stats),
      health_(options_.off_initial, options_.off_max),
      leases_(
          std::move(leaser), LeaseOptionsOf(options_),
          [this](const absl::Status& status) { RecordFailure(status); },
          [this] { stats_->Add(Statistic::kSharedLeaseRenewals); }),
      writes_(BackgroundWriterBounds{.max_jobs = options_.write_queue}, AtDestruction::kAbandon,
              [this](Write& write) { WriteOne(write); }) {}

SharedTier::~SharedTier() = default;

void SharedTier::RecordFailure(const absl::Status& status) {
  stats_->Add(Statistic::kSharedErrors);
  if (health_.RecordFailure(absl::Now())) {
    spdlog::warn("shared tier {}: {}; switched off for a while (requests go on without it)",
                 options_.url, std::string(status.message()));
  }
}

void SharedTier::LogRejectedOnce(const std::string& redis_key, const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (rejected_logged_.size() >= kMaxRejectedLogged) rejected_logged_.clear();
    if (!rejected_logged_.insert(redis_key).second) return;
  }
  spdlog::warn("shared tier {}: entry {} rejected, not served: {} (the next write replaces it)",
               options_.url, redis_key, std::string(status.message()));
}

std::optional<std::vector<Artifact>> SharedTier::FetchAll(const std::vector<ArtifactKey>& keys) {
  if (!health_.Available(absl::Now())) {
    stats_->Add(Statistic::kSharedSkips);
    return std::nullopt;
  }
  return Fetch(keys, absl::Now() + options_.budget, /*count=*/true);
}

std::optional<std::vector<Artifact>> SharedTier::Fetch(const std::vector<ArtifactKey>& keys,
                                                       absl::Time deadline, bool count) {
  std::vector<Artifact> artifacts;
  for (const ArtifactKey& key : keys) {
    std::string redis_key = SharedEntryRedisKey(key);
    absl::StatusOr<std::optional<std::string>> value = reader_->Get(redis_key, deadline);
    if (!value.ok()) {
      RecordFailure(value.status());
      return std::nullopt;
    }
    health_.RecordSuccess();
    if (!value->has_value()) {
      if (count) stats_->Add(Statistic::kSharedMisses);
      return std::nullopt;
    }
    absl::StatusOr<Artifact> artifact = OpenSharedEntry(options_.keys, key, **value);
    if (!artifact.ok()) {
      if (count) stats_->Add(Statistic::kSharedRejected);
      LogRejectedOnce(redis_key, artifact.status());
      return std::nullopt;
    }
    artifacts.push_back(*std::move(artifact));
  }
  stats_->Add(Statistic::kSharedHits, artifacts.size());
  return artifacts;
}

std::optional<std::vector<Artifact>> SharedTier::AwaitFleet(const std::vector<ArtifactKey>& keys,
                                                            std::string* lease) {
  lease->clear();
  if (keys.empty() || options_.wait <= absl::ZeroDuration() || !health_.Available(absl::Now())) {
    return std::nullopt;
  }
  const std::string lease_key = SharedLeaseRedisKey(keys.front());
  std::optional<std::vector<Artifact>> came;
  RedisLeases::Hooks hooks;
  hooks.arrived = [&]() -> std::optional<bool> {
    if (!health_.Available(absl::Now())) return std::nullopt;
    came = Fetch(keys, absl::Now() + options_.budget, /*count=*/false);
    return came.has_value();
  };
  LeaseWait wait = leases_.Await(lease_key, absl::Now() + options_.wait, hooks);
  if (wait.took) {
    stats_->Add(wait.waited ? Statistic::kSharedLeasesExpired : Statistic::kSharedLeasesTaken);
  }
  if (wait.waited) stats_->Add(Statistic::kSharedLeaseWaits);
  switch (wait.end) {
    case LeaseWaitEnd::kTaken:
      *lease = lease_key;
      return std::nullopt;
    case LeaseWaitEnd::kArrived:
      if (!wait.took) stats_->Add(Statistic::kSharedLeaseWaitHits);
      return came;
    case LeaseWaitEnd::kGaveUp:
      stats_->Add(Statistic::kSharedLeaseWaitsTimedOut);
      return std::nullopt;
    case LeaseWaitEnd::kFailed:
    case LeaseWaitEnd::kStopped:
      break;
  }
  return std::nullopt;  // the tier failed: compile without a lease
}

void SharedTier::Publish(const std::vector<std::shared_ptr<const Artifact>>& artifacts,
                         const std::string& lease) {
  for (const std::shared_ptr<const Artifact>& artifact : artifacts) {
    if (artifact->bytes.size() > options_.max_value_bytes) {
      stats_->Add(Statistic::kSharedTooBig);
    } else if (!writes_.Add(Write{artifact, ""}, artifact->bytes.size())) {
      stats_->Add(Statistic::kSharedWritesDropped);
    }
  }
  // The release goes last (and always: a lease left behind only delays the others until it
  // expires).
  if (!lease.empty()) writes_.AddAlways(Write{nullptr, lease});
}

void SharedTier::ReleaseLease(const std::string& lease) {
  if (!lease.empty()) writes_.AddAlways(Write{nullptr, lease});
}

void SharedTier::Flush() { writes_.Drain(); }

void SharedTier::WriteOne(const Write& write) {
  const std::shared_ptr<const Artifact>& artifact = write.artifact;
  if (artifact == nullptr) {
    leases_.Release(write.lease);
  } else if (!health_.Available(absl::Now())) {
    stats_->Add(Statistic::kSharedSkips);
  } else {
    std::string frame = SealSharedEntry(options_.keys, *artifact);
    absl::Status written = writer_->Set(SharedEntryRedisKey(artifact->meta.key), frame);
    if (written.ok()) {
      stats_->Add(Statistic::kSharedWrites);
      health_.RecordSuccess();
    } else {
      RecordFailure(written);
    }
  }
}

}  // namespace kcache
