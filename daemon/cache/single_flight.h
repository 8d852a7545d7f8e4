// SingleFlight: however many callers ask for the same key at once, one runs the work and all
// get its result. The artifact cache uses it so that N requests for one missing artifact (and
// a warm of it) compile it once.
#ifndef KCACHE_DAEMON_CACHE_SINGLE_FLIGHT_H_
#define KCACHE_DAEMON_CACHE_SINGLE_FLIGHT_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace kcache {

// `Value` is copied to every caller of one flight: make it cheap to copy (a StatusOr of a
// shared_ptr, say). Thread-safe. A flight ends when its work returns; a caller arriving after
// that starts a new flight, so the work should first look for what an earlier flight stored.
template <typename Key, typename Value, typename Hash = absl::Hash<Key>>
class SingleFlight {
 public:
  SingleFlight() = default;
  SingleFlight(const SingleFlight&) = delete;
  SingleFlight& operator=(const SingleFlight&) = delete;

  // Runs `work` unless a flight for `key` is under way, in which case it waits for that
  // flight and returns its result. `*waited` (when given) says which happened. `work` runs
  // on the calling thread with no lock held.
  Value Do(const Key& key, absl::FunctionRef<Value()> work, bool* waited = nullptr) {
    return Do(
        key, work, [] {}, waited);
  }
  // As above; a caller that joins a flight calls `on_join` (no lock held) before it waits.
  Value Do(const Key& key, absl::FunctionRef<Value()> work, absl::FunctionRef<void()> on_join,
           bool* waited = nullptr) {
    std::shared_ptr<Flight> flight;
    bool leader = false;
    {
      absl::MutexLock lock(&mu_);
      std::shared_ptr<Flight>& slot = flights_[key];
      if (slot == nullptr) {
        slot = std::make_shared<Flight>();
        leader = true;
      } else {
        ++slot->waiters;
      }
      flight = slot;
    }
    if (waited != nullptr) *waited = !leader;
    if (!leader) {
      on_join();
      flight->done.WaitForNotification();
      return *flight->value;
    }
    flight->value.emplace(work());
    {
      absl::MutexLock lock(&mu_);
      flights_.erase(key);
    }
    flight->done.Notify();  // publishes `value` to the waiters
    return *flight->value;
  }

  // Flights under way now.
  size_t in_flight() const {
    absl::MutexLock lock(&mu_);
    return flights_.size();
  }

  // Callers waiting on the flight for `key` now (0 when none is under way).
  int waiters(const Key& key) const {
    absl::MutexLock lock(&mu_);
    auto found = flights_.find(key);
    return found == flights_.end() ? 0 : found->second->waiters;
  }

 private:
  struct Flight {
    absl::Notification done;
    std::optional<Value> value;  // written by the leader before `done` is notified
    int waiters = 0;             // guarded by the SingleFlight's mu_
  };

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, std::shared_ptr<Flight>, Hash> flights_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_SINGLE_FLIGHT_H_
