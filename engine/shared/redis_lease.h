// RedisLeases: one compile per miss across a fleet of daemons sharing a Redis (Cluster): the
// leases of docs/shared-tier.md ("Compile once per fleet") and of client-made objects
// (docs/torch-extensions.md, "One compile per miss").
//
// A daemon that misses takes a lease on what it is about to compile (SET key token NX PX ttl,
// the token naming this daemon: "<host>/<pid>/<random>"). While it holds one, a thread of this
// object renews it to `ttl` from then every ttl / 3, so a compile longer than the lease is not
// duplicated; a holder that dies stops renewing and its lease expires. Renewals and releases
// are scripts that act only while the key still holds this token: a lease that expired and was
// taken by another daemon is neither renewed nor deleted by the first.
//
// A daemon that finds the lease held waits (Await): every `poll` it asks whether the holder's
// result has come and tries the lease again, until the result comes, the lease is free (its
// holder released it or died) and taken here, or it gives up.
//
// Thread-safe. Destroying it stops the renewals: leases still held expire.
#ifndef KCACHE_ENGINE_SHARED_REDIS_LEASE_H_
#define KCACHE_ENGINE_SHARED_REDIS_LEASE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/shared/redis_cluster.h"

namespace kcache {

struct RedisLeaseOptions {
  // How long a lease lasts without renewal (--shared-lease-seconds): how long a dead holder
  // delays the others.
  absl::Duration ttl = absl::Seconds(30);
  absl::Duration poll = absl::Milliseconds(50);  // a waiter's pause between looks
  // The longest one take or look may last (--shared-budget-ms); a renewal or release gets
  // `release_deadline`.
  absl::Duration call_budget = absl::Milliseconds(100);
  absl::Duration release_deadline = absl::Seconds(2);
};

// How an Await ended.
enum class LeaseWaitEnd {
  kTaken,    // this daemon holds the lease now: it compiles, then Release
  kArrived,  // the holder's result came (`arrived` said so)
  kGaveUp,   // `give_up` passed while another held it: compile without the lease
  kFailed,   // a call to Redis failed (told to `on_error`): compile without the lease
  kStopped,  // `keep_waiting` said to stop
};

struct LeaseWait {
  LeaseWaitEnd end = LeaseWaitEnd::kFailed;
  bool waited = false;  // another daemon held the lease when this one first tried
  bool took = false;    // this daemon took the lease (then released it at once if kArrived)
  std::string holder;   // the token of the lease's holder when this one waited (may be "")
};

class RedisLeases {
 public:
  // `redis`: its own connections (renewals never wait behind a large write). `on_error` (may
  // be empty) is told of each failed call, `on_renewed` (may be empty) of each renewal, from
  // the calling thread or the renewing one.
  RedisLeases(std::unique_ptr<RedisCluster> redis, RedisLeaseOptions options,
              std::function<void(const absl::Status&)> on_error = nullptr,
              std::function<void()> on_renewed = nullptr);
  ~RedisLeases();
  RedisLeases(const RedisLeases&) = delete;
  RedisLeases& operator=(const RedisLeases&) = delete;

  // What the waiting side is asked while it waits.
  struct Hooks {
    // Whether the holder's result has come: true ends the wait (kArrived); nullopt: the tier
    // failed (kFailed). Asked after each pause, and once right after this daemon took the
    // lease (the holder may have finished just before): then the lease is released at once.
    std::function<std::optional<bool>()> arrived;
    // Asked before each pause with the holder's token ("" when unknown); false ends the wait
    // (kStopped). May be empty.
    std::function<bool(const std::string& holder)> keep_waiting;
  };
  // Takes the lease on `key` (then held and renewed until Release), or waits for its holder as
  // the header says until `give_up`.
  LeaseWait Await(const std::string& key, absl::Time give_up, const Hooks& hooks);

  // Stops renewing `key` and deletes it while it holds this daemon's token. Call it once the
  // result is where the waiters look (after its writes), or when the compile failed. A failure
  // is told to `on_error` (the lease then expires).
  void Release(const std::string& key);

  const std::string& token() const { return token_; }

 private:
  void Hold(const std::string& key);
  void RunRenewals();
  absl::Time NextRenewal() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Failed(const absl::Status& status);

  const std::unique_ptr<RedisCluster> redis_;
  const RedisLeaseOptions options_;
  const std::function<void(const absl::Status&)> on_error_;
  const std::function<void()> on_renewed_;
  const std::string token_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, absl::Time> held_ ABSL_GUARDED_BY(mu_);  // key -> renew at
  bool rearm_ ABSL_GUARDED_BY(mu_) = false;  // Hold added a lease: recompute the next renewal
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread renewer_;
};

}  // namespace kcache

#endif  // KCACHE_ENGINE_SHARED_REDIS_LEASE_H_
