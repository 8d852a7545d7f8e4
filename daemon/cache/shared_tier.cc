#include "daemon/cache/shared_tier.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

constexpr size_t kMaxRejectedLogged = 10000;

// Deletes KEYS[1] only while it holds ARGV[1]: a daemon never releases another's lease.
constexpr char kReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
    "return 0";
// Extends a lease this daemon still holds (ARGV[2] milliseconds from now).
constexpr char kRenewScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
    "end return 0";

std::string NewToken() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "/", getpid(), "/", std::random_device{}());
}

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
  return std::unique_ptr<SharedTier>(
      new SharedTier(std::move(options), *std::move(reader), *std::move(writer), stats));
}

SharedTier::SharedTier(SharedTierOptions options, std::unique_ptr<RedisCluster> reader,
                       std::unique_ptr<RedisCluster> writer, Statistics* stats)
    : options_(std::move(options)),
      reader_(std::move(reader)),
      writer_(std::move(writer)),
      stats_(stats),
      health_(options_.off_initial, options_.off_max),
      token_(NewToken()) {
  thread_ = std::thread([this] { RunWriter(); });
}

SharedTier::~SharedTier() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

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

std::optional<bool> SharedTier::TakeLease(const std::string& lease) {
  absl::StatusOr<bool> taken = reader_->SetIfAbsent(lease, token_, options_.lease_ttl);
  if (!taken.ok()) {
    RecordFailure(taken.status());
    return std::nullopt;
  }
  return *taken;
}

std::optional<std::vector<Artifact>> SharedTier::AwaitFleet(const std::vector<ArtifactKey>& keys,
                                                            std::string* lease) {
  lease->clear();
  if (keys.empty() || options_.wait <= absl::ZeroDuration() || !health_.Available(absl::Now())) {
    return std::nullopt;
  }
  const std::string lease_key = SharedLeaseRedisKey(keys.front());
  const absl::Time give_up = absl::Now() + options_.wait;
  bool waited = false;
  while (true) {
    std::optional<bool> taken = TakeLease(lease_key);
    if (!taken) return std::nullopt;  // the tier failed: compile without a lease
    if (*taken) {
      stats_->Add(waited ? Statistic::kSharedLeasesExpired : Statistic::kSharedLeasesTaken);
      *lease = lease_key;
      Hold(lease_key);
      // The holder may have written and released between our miss and our lease.
      if (std::optional<std::vector<Artifact>> late =
              Fetch(keys, absl::Now() + options_.budget, /*count=*/false)) {
        Unhold(lease_key);
        Release(lease_key);
        lease->clear();
        return late;
      }
      return std::nullopt;
    }
    if (!waited) stats_->Add(Statistic::kSharedLeaseWaits);
    waited = true;
    if (absl::Now() >= give_up) {
      stats_->Add(Statistic::kSharedLeaseWaitsTimedOut);
      return std::nullopt;
    }
    absl::SleepFor(options_.poll);
    if (!health_.Available(absl::Now())) return std::nullopt;
    if (std::optional<std::vector<Artifact>> arrived =
            Fetch(keys, absl::Now() + options_.budget, /*count=*/false)) {
      stats_->Add(Statistic::kSharedLeaseWaitHits);
      return arrived;
    }
  }
}

void SharedTier::Release(const std::string& lease) {
  absl::Status released =
      writer_->Command({"EVAL", kReleaseScript, "1", lease, token_}, /*key_index=*/3).status();
  if (!released.ok()) RecordFailure(released);
}

void SharedTier::Publish(const std::vector<std::shared_ptr<const Artifact>>& artifacts,
                         const std::string& lease) {
  absl::MutexLock lock(&mu_);
  for (const std::shared_ptr<const Artifact>& artifact : artifacts) {
    if (artifact->bytes.size() > options_.max_value_bytes) {
      stats_->Add(Statistic::kSharedTooBig);
    } else if (queue_.size() >= options_.write_queue) {
      stats_->Add(Statistic::kSharedWritesDropped);
    } else {
      queue_.push_back(Write{artifact, ""});
    }
  }
  // The release goes last (and always: a lease left behind only delays the others until it
  // expires).
  if (!lease.empty()) {
    held_.erase(lease);
    queue_.push_back(Write{nullptr, lease});
  }
}

void SharedTier::ReleaseLease(const std::string& lease) {
  if (lease.empty()) return;
  absl::MutexLock lock(&mu_);
  held_.erase(lease);
  queue_.push_back(Write{nullptr, lease});
}

void SharedTier::Hold(const std::string& lease) {
  absl::MutexLock lock(&mu_);
  held_[lease] = absl::Now() + options_.lease_ttl / 3;
  rearm_ = true;
}

void SharedTier::Unhold(const std::string& lease) {
  absl::MutexLock lock(&mu_);
  held_.erase(lease);
}

absl::Time SharedTier::NextRenewal() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [lease, at] : held_) next = std::min(next, at);
  return next;
}

void SharedTier::RenewDue() {
  std::vector<std::string> due;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = absl::Now();
    for (auto& [lease, at] : held_) {
      if (at > now) continue;
      due.push_back(lease);
      at = now + options_.lease_ttl / 3;
    }
  }
  std::string ttl_ms = std::to_string(absl::ToInt64Milliseconds(options_.lease_ttl));
  for (const std::string& lease : due) {
    absl::Status renewed =
        writer_->Command({"EVAL", kRenewScript, "1", lease, token_, ttl_ms}, /*key_index=*/3)
            .status();
    if (renewed.ok()) {
      stats_->Add(Statistic::kSharedLeaseRenewals);
    } else {
      RecordFailure(renewed);
    }
  }
}

void SharedTier::Flush() {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopping_ || (queue_.empty() && writing_ == 0);
  };
  mu_.Await(absl::Condition(&done));
}

void SharedTier::RunWriter() {
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty() || rearm_;
  };
  while (true) {
    Write write;
    bool renew = false;
    {
      absl::MutexLock lock(&mu_);
      // Wakes for a write, when a lease held for a running compile is due for renewal, or
      // when a new lease (Hold) moves the next renewal earlier.
      mu_.AwaitWithDeadline(absl::Condition(&ready), NextRenewal());
      if (stopping_) return;
      rearm_ = false;
      // A renewal that is due goes before queued writes: a long queue must not let a lease
      // expire under a running compile.
      renew = NextRenewal() <= absl::Now();
      if (!renew) {
        if (queue_.empty()) continue;
        write = std::move(queue_.front());
        queue_.pop_front();
        ++writing_;
      }
    }
    if (renew) {
      RenewDue();
      continue;
    }
    const std::shared_ptr<const Artifact>& artifact = write.artifact;
    if (artifact == nullptr) {
      Release(write.lease);
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
    absl::MutexLock lock(&mu_);
    --writing_;
  }
}

}  // namespace kcache
