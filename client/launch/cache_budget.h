// One launcher command's time for kcached (KCACHE_TIMEOUT_MS, default 1000 ms): its lookups
// and its put together, across kcache-launch and the kcache it hands a command to (what is
// left travels in the environment, HandOn). A call that runs out of it is a time-out: kcached
// is marked unresponsive (unresponsive_mark.h), the command compiles without asking further
// and its object is not stored, so a hung kcached costs a command at most the budget and the
// commands after it nothing until the mark expires. A daemon that is not there (no socket, a
// refused connection) fails at once and is no time-out. The compile itself is not counted.
// Not thread-safe: one launcher command's, shared by its caches.
#ifndef KCACHE_CLIENT_LAUNCH_CACHE_BUDGET_H_
#define KCACHE_CLIENT_LAUNCH_CACHE_BUDGET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"
#include "client/launch/unresponsive_mark.h"
#include "engine/launcher/handed_miss.h"
#include "engine/objects/object_cache.h"

namespace kcache::launch {

// "<milliseconds left>:<pid>:<flags>", set by kcache-launch just before it execs kcache; the
// pid (exec keeps it) makes a copy that leaked into another process's environment no budget.
// Flags: "p", the command asks again after an expired mark.
inline constexpr char kTimeoutLeftEnv[] = "KCACHE_TIMEOUT_LEFT";

// KCACHE_TIMEOUT_MS when unset (or not a positive number). A hit through the fast path asks
// kcached for well under a millisecond, a miss's gRPC lookup and put a few; this leaves room
// for a daemon busy serving a parallel build on a loaded machine.
inline constexpr absl::Duration kDefaultCacheTimeout = absl::Seconds(1);
// How long moving `bytes` to or from kcached may take besides the budget, so that a large
// object is not taken for a hung daemon: 50 ms per MiB. A 150 MiB put (Inductor's precompiled
// header) takes ~1.6 s on an idle 2-core machine, several times that beside a build, and gets
// 7.5 s; an object of the 256 MiB bound gets 12.8 s.
absl::Duration TransferTime(uint64_t bytes);

// The sizes of the entries a lookup's List gave: a Get of one of them takes its TransferTime.
class ListedSizes {
 public:
  void Note(const std::vector<ObjectEntry>& entries);
  // Entries listed by another process (a handed-over lookup, engine/launcher/handed_miss.h).
  void Note(const std::vector<objects::HandedEntry>& entries);
  // Zero for an entry not listed.
  absl::Duration TransferTimeOf(const ObjectEntryKey& key) const;

 private:
  std::unordered_map<std::string, uint64_t> sizes_;  // by ObjectEntryKey::entry_id
};

class CacheBudget {
 public:
  // One call to kcached, from Begin to End.
  struct Call {
    absl::Time started;
    absl::Time deadline;    // the call's own (Begin's cap may bring it before budget_end)
    absl::Time budget_end;  // what was left of the budget, plus the call's transfer time
  };

  // `left` of the budget for kcached at `mark`'s server; `log`: KCACHE_LOG lines on stderr;
  // `variable`: the variable the budget was set by, which those lines name.
  CacheBudget(absl::Duration left, UnresponsiveMark mark, bool log,
              std::string variable = "KCACHE_TIMEOUT_MS");
  // KCACHE_TIMEOUT_MS for `server` (KCACHE_SERVER), or, in the kcache a kcache-launch handed
  // this command to (the same process, exec'd), what it left (KCACHE_TIMEOUT_LEFT, always
  // taken out of the environment so that the compiler's processes do not inherit it).
  static std::shared_ptr<CacheBudget> FromEnvironment(const std::string& server, bool log);

  // Whether to compile without asking kcached: a mark holds (the KCACHE_LOG line says until
  // when). Once per command, before any call; when the mark has expired, this command is the
  // one that asks again. False in the kcache a kcache-launch handed the command to: it asked.
  bool CompileWithoutAsking();

  // Begins a call to kcached: its deadline is what is left plus `transfer` (TransferTime of
  // the bytes it moves), at most `cap` from now (a call not worth the whole budget).
  Call Begin(absl::Duration transfer = absl::ZeroDuration(),
             absl::Duration cap = absl::InfiniteDuration()) const;
  // Ends `call`, its time spent. `answered`: kcached answered (whatever it said; a mark this
  // command probes is taken away). Otherwise, when the budget ran out, the call timed out:
  // kcached is marked unresponsive and every later call of the command is refused (spent()).
  void End(const Call& call, bool answered);
  // Ends `call` that expects no answer (a note sent): its time is spent, nothing more.
  void Spend(const Call& call);
  // kcached answered, then went silent for `silence` while it said it was waiting for another
  // launcher's compile (AwaitCompile): a hang, as a call that timed out (marked, and every
  // later call of the command refused). The wait itself is not spent from the budget.
  void Silent(absl::Duration silence);

  // Nothing is left, or a call timed out: a call now would not be answered in time.
  bool spent() const { return timed_out_ || left_ <= absl::ZeroDuration(); }
  bool timed_out() const { return timed_out_; }
  absl::Duration left() const { return left_; }
  absl::Duration total() const { return total_; }  // KCACHE_TIMEOUT_MS
  // "kcached unresponsive (mark until 12:34:56.789)": why a command compiles without asking.
  std::string Unresponsive() const;
  // The KCACHE_LOG line of a command that compiles without asking: Unresponsive(), "compiling
  // uncached".
  void LogCompilingUncached() const;
  // Why a call is refused once spent(): Unresponsive(), or no time left.
  std::string WhySpent() const;
  // Before exec'ing kcache with this command: sets KCACHE_TIMEOUT_LEFT to what is left.
  void HandOn() const;

 private:
  void Log(const std::string& line) const;

  absl::Duration total_;  // KCACHE_TIMEOUT_MS (variable_): what the log lines name
  std::string variable_;
  absl::Duration left_;
  UnresponsiveMark mark_;
  bool log_;
  bool handed_on_ = false;  // this kcache was handed the command by kcache-launch
  bool timed_out_ = false;
  std::optional<absl::Time> marked_until_;
};

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_CACHE_BUDGET_H_
