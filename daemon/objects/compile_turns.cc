// One compile per launcher miss: the turns of one kcached's launchers, and the fleet's lease.
#include "daemon/objects/compile_turns.h"

#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kcache::objects {
namespace {

// How a flight ended for its waiters.
enum Outcome : int {
  kArrivedOutcome,    // the holder's entry is there: look up again
  kReleasedOutcome,   // the holder's compile failed or was not stored: compile
  kHolderGoneOutcome  // the holder went away: take turns again
};

// Text from a launcher or another pod, printed in a launcher's message: printable ASCII, at
// most 160 characters.
std::string Printable(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (out.size() >= 160) break;
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

// A fleet lease's holder in words: its token is "<host>/<pid>/<random>".
std::string FleetHolder(const std::string& token) {
  std::vector<std::string> parts = absl::StrSplit(token, '/');
  if (parts.size() != 3) return token.empty() ? "another kcached of the fleet" : Printable(token);
  return Printable(absl::StrCat("the kcached on ", parts[0], " (pid ", parts[1], ")"));
}

std::string Seconds(absl::Duration duration) {
  return absl::StrCat(absl::ToInt64Seconds(duration), " s");
}

// Tells a launcher every heartbeat that it still waits, from a thread of its own, while its
// call's thread waits on the fleet (whose calls and fetches may take longer than a heartbeat:
// the launcher must not take that for a hung kcached). Destroyed before that thread sends again.
class Heartbeat {
 public:
  Heartbeat(TurnCall& call, const CompileTurnOptions& options) : call_(call), options_(options) {}
  ~Heartbeat() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  // Beats (from the first call on) naming `holder`.
  void Holder(const std::string& holder) {
    absl::MutexLock lock(&mu_);
    holder_ = holder;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  // A beat could not be sent: the launcher is gone.
  bool gone() {
    absl::MutexLock lock(&mu_);
    return gone_;
  }

 private:
  void Run() {
    while (true) {
      std::string holder;
      {
        absl::MutexLock lock(&mu_);
        if (stop_) return;
        holder = holder_;
      }
      bool sent = call_.Send(TurnUpdate{TurnUpdate::Kind::kWait, holder, "", options_.wait});
      absl::MutexLock lock(&mu_);
      if (!sent) {
        gone_ = true;
        return;
      }
      mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.heartbeat);
    }
  }

  TurnCall& call_;
  const CompileTurnOptions& options_;
  absl::Mutex mu_;
  std::string holder_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

struct CompileTurns::Flight {
  std::string holder;  // whose compile the waiters wait for, in words
  bool done = false;
  int outcome = kHolderGoneOutcome;
  std::string why;  // kReleasedOutcome: why the holder's compile was not stored
};

CompileTurns::CompileTurns(CompileTurnOptions options, ObjectCache* stores,
                           FleetCompileLeases* fleet, std::function<void(TurnCount, int64_t)> count,
                           std::function<void(const CommandKey&)> arrived_from_fleet)
    : options_(options),
      stores_(stores),
      fleet_(fleet),
      count_(std::move(count)),
      arrived_from_fleet_(std::move(arrived_from_fleet)) {}

void CompileTurns::Count(TurnCount what, int64_t n) const {
  if (count_) count_(what, n);
}

bool CompileTurns::StoredSince(const CommandKey& key1,
                               const absl::flat_hash_set<std::string>& seen) {
  absl::StatusOr<std::vector<ObjectEntry>> entries = stores_->List(key1);
  if (!entries.ok()) return false;
  for (const ObjectEntry& entry : *entries) {
    if (!seen.contains(entry.key.entry_id)) return true;
  }
  return false;
}

void CompileTurns::Serve(const CommandKey& key1, const absl::flat_hash_set<std::string>& seen,
                         const std::string& client, TurnCall& call) {
  if (options_.wait <= absl::ZeroDuration()) {
    call.Send(TurnUpdate{TurnUpdate::Kind::kCompile, "", "", absl::ZeroDuration()});
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (calls_ >= options_.max_calls) {
      Count(TurnCount::kRefused);
      call.Send(TurnUpdate{TurnUpdate::Kind::kCompile, "",
                           absl::StrCat("kcached serves --object-max-turn-calls=",
                                        options_.max_calls, " launchers' turns already"),
                           absl::ZeroDuration()});
      return;
    }
    ++calls_;
  }
  Count(TurnCount::kCalls, 1);
  const std::string who = Printable(client);
  const absl::Time give_up = absl::Now() + options_.wait;
  bool waited = false;
  std::string gone;  // the holder this call waited for, when it went away
  while (true) {
    std::shared_ptr<Flight> flight;
    bool lead = false;
    {
      absl::MutexLock lock(&mu_);
      std::shared_ptr<Flight>& slot = flights_[std::string(key1.Bytes())];
      if (slot == nullptr) {
        slot = std::make_shared<Flight>();
        slot->holder = who;
        lead = true;
      }
      flight = slot;
    }
    if (lead) {
      std::string why;
      if (!gone.empty()) {
        Count(TurnCount::kReleased);
        why = absl::StrCat(gone, " went away before its compile ended");
      }
      Lead(key1, seen, who, std::move(why), flight, give_up, call, &waited);
      break;
    }
    if (Follow(flight, give_up, call, &waited, &gone) == Followed::kDone) break;
  }
  absl::MutexLock lock(&mu_);
  --calls_;
  Count(TurnCount::kCalls, -1);
}

void CompileTurns::Lead(const CommandKey& key1, const absl::flat_hash_set<std::string>& seen,
                        const std::string& client, std::string why,
                        const std::shared_ptr<Flight>& flight, absl::Time give_up, TurnCall& call,
                        bool* waited) {
  // A turn that ended between this launcher's lookup and its call stored what it compiles.
  if (StoredSince(key1, seen)) {
    Finish(key1, flight, kArrivedOutcome, "");
    ServeArrival("a launcher that finished just before", call);
    return;
  }
  bool fleet_lease = false;
  if (fleet_ != nullptr) {
    std::string holder;
    LeaseWait wait;
    {
      Heartbeat beat(call, options_);
      wait = fleet_->Await(key1, seen, give_up, [&](const std::string& token) {
        holder = FleetHolder(token);
        SetHolder(flight, holder);
        beat.Holder(holder);
        if (!*waited) Count(TurnCount::kWaits);
        *waited = true;
        return !beat.gone() && !call.Gone();
      });
    }
    switch (wait.end) {
      case LeaseWaitEnd::kArrived:
        if (arrived_from_fleet_) arrived_from_fleet_(key1);
        Finish(key1, flight, kArrivedOutcome, "");
        ServeArrival(holder.empty() ? "another kcached of the fleet" : holder, call);
        return;
      case LeaseWaitEnd::kStopped:
        Finish(key1, flight, kHolderGoneOutcome, "");
        return;
      case LeaseWaitEnd::kTaken:
        fleet_lease = true;
        if (wait.waited) {
          Count(TurnCount::kReleased);
          why = absl::StrCat(holder,
                             " gave its lease up (its compile failed or was not stored, "
                             "or it died): this launcher compiles for the fleet");
        }
        break;
      case LeaseWaitEnd::kGaveUp:
        Count(TurnCount::kGaveUp);
        why =
            absl::StrCat("waited --object-wait-seconds=", Seconds(options_.wait), " for ", holder);
        break;
      case LeaseWaitEnd::kFailed:
        if (wait.waited) why = "the fleet tier failed while waiting";
        break;
    }
  }
  SetHolder(flight, client);
  if (!call.Send(TurnUpdate{TurnUpdate::Kind::kCompile, "", why, absl::ZeroDuration(), true})) {
    if (fleet_lease) fleet_->Release(key1);
    Finish(key1, flight, kHolderGoneOutcome, "");
    return;
  }
  if (!*waited) Count(TurnCount::kHeld);
  std::optional<TurnEnd> end = call.Receive();
  if (fleet_lease) fleet_->Release(key1);
  if (!end.has_value()) {
    Finish(key1, flight, kHolderGoneOutcome, "");
  } else if (end->kind == TurnEnd::Kind::kStored) {
    Finish(key1, flight, kArrivedOutcome, "");
  } else {
    Finish(key1, flight, kReleasedOutcome,
           end->why.empty() ? "was not stored" : Printable(end->why));
  }
}

CompileTurns::Followed CompileTurns::Follow(const std::shared_ptr<Flight>& flight,
                                            absl::Time give_up, TurnCall& call, bool* waited,
                                            std::string* gone) {
  if (!*waited) Count(TurnCount::kWaits);
  *waited = true;
  absl::Time next_beat = absl::Now();  // the first update at once
  std::string holder;
  while (true) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&flight->done), std::min(next_beat, give_up));
      done = flight->done;
      holder = flight->holder;
    }
    if (done) break;
    absl::Time now = absl::Now();
    if (now >= give_up) {
      Count(TurnCount::kGaveUp);
      call.Send(TurnUpdate{
          TurnUpdate::Kind::kCompile, "",
          absl::StrCat("waited --object-wait-seconds=", Seconds(options_.wait), " for ", holder),
          absl::ZeroDuration()});
      return Followed::kDone;
    }
    if (now >= next_beat) {
      if (!call.Send(TurnUpdate{TurnUpdate::Kind::kWait, holder, "", options_.wait})) {
        return Followed::kDone;
      }
      next_beat = now + options_.heartbeat;
    }
    if (call.Gone()) return Followed::kDone;
  }
  int outcome = kHolderGoneOutcome;
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    outcome = flight->outcome;
    why = flight->why;
  }
  switch (outcome) {
    case kArrivedOutcome:
      ServeArrival(holder, call);
      return Followed::kDone;
    case kReleasedOutcome:
      Count(TurnCount::kReleased);
      call.Send(TurnUpdate{TurnUpdate::Kind::kCompile, "",
                           absl::StrCat("the compile of ", holder, " ", why),
                           absl::ZeroDuration()});
      return Followed::kDone;
    default:
      *gone = holder;
      return Followed::kHolderGone;
  }
}

void CompileTurns::ServeArrival(const std::string& holder, TurnCall& call) {
  if (!call.Send(TurnUpdate{TurnUpdate::Kind::kArrived, holder, "", absl::ZeroDuration()})) return;
  std::optional<TurnEnd> end = call.Receive();
  if (!end.has_value()) return;
  Count(end->kind == TurnEnd::Kind::kServed ? TurnCount::kServed : TurnCount::kNotServed);
}

void CompileTurns::Finish(const CommandKey& key1, const std::shared_ptr<Flight>& flight,
                          int outcome, std::string why) {
  absl::MutexLock lock(&mu_);
  flight->done = true;
  flight->outcome = outcome;
  flight->why = std::move(why);
  auto it = flights_.find(key1.Bytes());
  if (it != flights_.end() && it->second == flight) flights_.erase(it);
}

void CompileTurns::SetHolder(const std::shared_ptr<Flight>& flight, const std::string& holder) {
  absl::MutexLock lock(&mu_);
  flight->holder = holder;
}

}  // namespace kcache::objects
