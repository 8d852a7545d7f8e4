// CompileTurns: one compile per launcher miss (docs/torch-extensions.md, "One compile per
// miss"), kcached's side of the AwaitCompile call (proto/kcache/v1/objects.proto).
//
// Launchers of one kcached that miss the same command (its key1, known before the compile)
// take turns: the first call holds the turn and its launcher compiles; the others wait. When
// the holder's launcher says its compile was stored, the waiters are told to look up again:
// each serves the entry only when its manifest matches its own files (the launcher's lookup,
// the checks of any hit), and compiles itself otherwise. When the holder's compile failed or
// was not stored, the waiters compile themselves, told why; when its launcher went away
// (killed), they take turns again. With a fleet (FleetCompileLeases: --share-client-objects),
// the call holding this kcached's turn first takes the fleet's lease on key1, or waits, for
// every caller here, for the kcached holding it: its entry, once in the tier, is copied into
// this kcached's store and the waiters look up again.
//
// Bounds: each call waits at most `wait` (from its start, whoever it waits for: a holder that
// never finishes delays no one longer), and at most `max_calls` calls are served at once
// (holding or waiting): one more is told to compile at once, counted. A holder's compile
// itself is not bounded here: its launcher compiles as it would without kcache.
//
// Thread-safe; each call runs on the thread that serves it (Serve blocks until it ends).
#ifndef KCACHE_DAEMON_OBJECTS_COMPILE_TURNS_H_
#define KCACHE_DAEMON_OBJECTS_COMPILE_TURNS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/object_entry.h"
#include "engine/objects/object_cache.h"
#include "engine/shared/redis_lease.h"

namespace kcache::objects {

// What a launcher is told (AwaitCompileUpdate).
struct TurnUpdate {
  enum class Kind {
    kCompile,  // compile now (`why`, after a wait): holding the turn when `holds`
    kWait,     // another compiles it (`holder`): wait, for at most `limit` from the start
    kArrived,  // the holder's entry was stored: look it up again, then say whether it served
  };
  Kind kind = Kind::kCompile;
  std::string holder;  // kWait, kArrived: whose compile, in words ("" when not known)
  std::string why;
  absl::Duration limit;
  bool holds = false;  // kCompile: the launcher then says how its compile ended (TurnEnd)
};

// How a launcher's call ended (AwaitCompileRequest's later messages).
struct TurnEnd {
  enum class Kind {
    kStored,     // the holder's compile was stored
    kNotStored,  // the holder's compile failed or was not stored (`why`)
    kServed,     // a waiter was served the holder's entry
    kNotServed,  // a waiter's lookup found no entry matching its files (it compiles)
  };
  Kind kind = Kind::kNotStored;
  std::string why;
};

// One call as CompileTurns sees it (the service's stream). Used by one thread.
class TurnCall {
 public:
  virtual ~TurnCall() = default;
  virtual bool Send(const TurnUpdate& update) = 0;  // false: the launcher is gone
  virtual bool Gone() = 0;                          // the launcher went away
  // The launcher's next message; blocks. nullopt when it went away or closed without one.
  virtual std::optional<TurnEnd> Receive() = 0;
};

// The fleet's part (FleetObjectCache, --share-client-objects).
class FleetCompileLeases {
 public:
  virtual ~FleetCompileLeases() = default;
  // Takes the fleet's lease on compiling key1 (then held, renewed, until Release) or waits,
  // as RedisLeases::Await, for the kcached holding it, until an entry under key1 that the
  // tier did not list when the wait began, nor `seen` (the launcher's lookup) names, is in the
  // tier (then copied into this kcached's store: kArrived) or the lease is taken here.
  // `keep_waiting` gets the holder's token.
  virtual LeaseWait Await(const CommandKey& key1, const absl::flat_hash_set<std::string>& seen,
                          absl::Time give_up,
                          std::function<bool(const std::string& holder)> keep_waiting) = 0;
  // Releases the lease on key1 this kcached took, once the entries put before are written.
  virtual void Release(const CommandKey& key1) = 0;
};

// What is counted (kcached's objects.turn_* statistics).
enum class TurnCount {
  kHeld,       // calls that held a turn: their launcher compiled for the others
  kWaits,      // calls that waited for another launcher's compile (here or in the fleet)
  kServed,     // waits whose launcher was then served the holder's entry
  kNotServed,  // waits whose launcher found the holder's entry not matching its files
  kReleased,   // waits ended by the holder's compile failing, not stored, or its lease going
  kGaveUp,     // waits that passed `wait` (the launcher compiled on its own)
  kRefused,    // calls past `max_calls`, told to compile at once
  kCalls,      // a gauge: calls served now (counted with +1 and -1)
};

struct CompileTurnOptions {
  // --object-wait-seconds: the longest a launcher waits for another's compile; zero: no turns
  // (every miss compiles at once, as a kcached without them).
  absl::Duration wait = absl::Minutes(3);
  // --object-max-turn-calls: calls served at once (holding or waiting).
  int64_t max_calls = 256;
  // How often a waiting launcher is told it still waits (it takes silence for a hung kcached).
  absl::Duration heartbeat = absl::Milliseconds(250);
};

class CompileTurns {
 public:
  // `stores` (kcached's own stores, without the fleet tier: where a launcher's put lands) and
  // `fleet` (may be null: this kcached alone) are borrowed and must outlive this. `count` and
  // `arrived_from_fleet` (told that entries under key1 were copied in beneath kcached's object
  // memory, which must forget its listing) may be empty.
  CompileTurns(CompileTurnOptions options, ObjectCache* stores, FleetCompileLeases* fleet,
               std::function<void(TurnCount, int64_t)> count,
               std::function<void(const CommandKey&)> arrived_from_fleet);

  // Serves one launcher's call for `key1`. `seen`: the entry ids its lookup listed (and found
  // not matching its files): an entry stored under key1 since, by a compile that ended just
  // before this call, is served as an arrival rather than compiled again. `client` says who it
  // is ("kcache pid 12 on host-a"; made printable and short here). Returns when the call is
  // done with.
  void Serve(const CommandKey& key1, const absl::flat_hash_set<std::string>& seen,
             const std::string& client, TurnCall& call);

 private:
  struct Flight;
  enum class Followed { kDone, kHolderGone };
  // The call holding the turn: `why` says why it compiles after a wait ("": it did not).
  void Lead(const CommandKey& key1, const absl::flat_hash_set<std::string>& seen,
            const std::string& client, std::string why, const std::shared_ptr<Flight>& flight,
            absl::Time give_up, TurnCall& call, bool* waited);
  // Whether `stores` list an entry under key1 that is not in `seen`.
  bool StoredSince(const CommandKey& key1, const absl::flat_hash_set<std::string>& seen);
  // A call waiting for the holder of `flight`; kHolderGone sets `*gone` to who it was.
  Followed Follow(const std::shared_ptr<Flight>& flight, absl::Time give_up, TurnCall& call,
                  bool* waited, std::string* gone);
  // Tells a waiter that `holder`'s entry arrived and counts what its lookup found.
  void ServeArrival(const std::string& holder, TurnCall& call);
  // Ends `flight` for its waiters and forgets it.
  void Finish(const CommandKey& key1, const std::shared_ptr<Flight>& flight, int outcome,
              std::string why);
  void SetHolder(const std::shared_ptr<Flight>& flight, const std::string& holder);
  void Count(TurnCount what, int64_t n = 1) const;

  const CompileTurnOptions options_;
  ObjectCache* const stores_;
  FleetCompileLeases* const fleet_;
  const std::function<void(TurnCount, int64_t)> count_;
  const std::function<void(const CommandKey&)> arrived_from_fleet_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mu_);
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kcache::objects

#endif  // KCACHE_DAEMON_OBJECTS_COMPILE_TURNS_H_
