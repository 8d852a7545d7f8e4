// Leases on Redis keys for one compile per miss across a fleet.
#include "engine/shared/redis_lease.h"

#include <unistd.h>

#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/process_identity.h"

namespace kcache {
namespace {

// Deletes KEYS[1] only while it holds ARGV[1]: a daemon never releases another's lease.
constexpr char kReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
    "return 0";
// Extends a lease this daemon still holds (ARGV[2] milliseconds from now).
constexpr char kRenewScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
    "end return 0";

std::string NewToken() {
  return absl::StrCat(HostName(), "/", getpid(), "/", std::random_device{}());
}

std::string Millis(absl::Duration duration) {
  return absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

}  // namespace

RedisLeases::RedisLeases(std::unique_ptr<RedisCluster> redis, RedisLeaseOptions options,
                         std::function<void(const absl::Status&)> on_error,
                         std::function<void()> on_renewed)
    : redis_(std::move(redis)),
      options_(options),
      on_error_(std::move(on_error)),
      on_renewed_(std::move(on_renewed)),
      token_(NewToken()) {
  renewer_ = std::thread([this] { RunRenewals(); });
}

RedisLeases::~RedisLeases() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  renewer_.join();
}

void RedisLeases::Failed(const absl::Status& status) {
  if (on_error_) on_error_(status);
}

LeaseWait RedisLeases::Await(const std::string& key, absl::Time give_up, const Hooks& hooks) {
  LeaseWait wait;
  const std::string ttl_ms = Millis(options_.ttl);
  while (true) {
    absl::StatusOr<RedisReply> set = redis_->Command({"SET", key, token_, "NX", "PX", ttl_ms}, 1,
                                                     absl::Now() + options_.call_budget);
    if (!set.ok()) {
      Failed(set.status());
      wait.end = LeaseWaitEnd::kFailed;
      return wait;
    }
    if (!set->is_nil()) {
      wait.took = true;
      Hold(key);
      std::optional<bool> late = hooks.arrived();
      if (late.value_or(false)) {
        Release(key);
        wait.end = LeaseWaitEnd::kArrived;
      } else {
        wait.end = LeaseWaitEnd::kTaken;
      }
      return wait;
    }
    if (!wait.waited) {
      wait.waited = true;
      absl::StatusOr<std::optional<std::string>> holder =
          redis_->Get(key, absl::Now() + options_.call_budget);
      if (holder.ok() && holder->has_value()) wait.holder = **holder;
    }
    if (absl::Now() >= give_up) {
      wait.end = LeaseWaitEnd::kGaveUp;
      return wait;
    }
    if (hooks.keep_waiting && !hooks.keep_waiting(wait.holder)) {
      wait.end = LeaseWaitEnd::kStopped;
      return wait;
    }
    absl::SleepFor(std::min(options_.poll, std::max(give_up - absl::Now(), absl::ZeroDuration())));
    std::optional<bool> arrived = hooks.arrived();
    if (!arrived.has_value()) {
      wait.end = LeaseWaitEnd::kFailed;
      return wait;
    }
    if (*arrived) {
      wait.end = LeaseWaitEnd::kArrived;
      return wait;
    }
  }
}

void RedisLeases::Release(const std::string& key) {
  {
    absl::MutexLock lock(&mu_);
    held_.erase(key);
  }
  absl::Status released = redis_
                              ->Command({"EVAL", kReleaseScript, "1", key, token_}, /*key_index=*/3,
                                        absl::Now() + options_.release_deadline)
                              .status();
  if (!released.ok()) Failed(released);
}

void RedisLeases::Hold(const std::string& key) {
  absl::MutexLock lock(&mu_);
  held_[key] = absl::Now() + options_.ttl / 3;
  rearm_ = true;
}

absl::Time RedisLeases::NextRenewal() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, at] : held_) next = std::min(next, at);
  return next;
}

void RedisLeases::RunRenewals() {
  auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || rearm_; };
  const std::string ttl_ms = Millis(options_.ttl);
  while (true) {
    std::vector<std::string> due;
    {
      absl::MutexLock lock(&mu_);
      // Wakes when a renewal is due, or when a new lease (Hold) moves the next one earlier.
      mu_.AwaitWithDeadline(absl::Condition(&woken), NextRenewal());
      if (stopping_) return;
      rearm_ = false;
      absl::Time now = absl::Now();
      for (auto& [key, at] : held_) {
        if (at > now) continue;
        due.push_back(key);
        at = now + options_.ttl / 3;
      }
    }
    for (const std::string& key : due) {
      absl::Status renewed = redis_
                                 ->Command({"EVAL", kRenewScript, "1", key, token_, ttl_ms},
                                           /*key_index=*/3, absl::Now() + options_.release_deadline)
                                 .status();
      if (!renewed.ok()) {
        Failed(renewed);
      } else if (on_renewed_) {
        on_renewed_();
      }
    }
  }
}

}  // namespace kcache
