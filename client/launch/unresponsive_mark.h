// The "kcached unresponsive" mark: a small file in KCACHE_STATE_DIR that a launcher command
// writes when kcached did not answer within its cache budget (cache_budget.h), so that the
// commands after it compile without asking kcached until the mark expires
// (KCACHE_UNRESPONSIVE_MS, default 20 s). Then one command asks again (it renews the mark for
// as long as its asking may take, so that the others keep compiling meanwhile); an answer
// removes the mark, another time-out writes it anew.
//
// The file, `kcached-unresponsive`, is one line: "kcached-unresponsive v1 <until: Unix
// milliseconds> <server address>". A mark for another address is left alone and not honoured.
// One that does not parse, or ends further away than KCACHE_UNRESPONSIVE_MS from now (a clock
// set back), is stale, as an expired one is: a stale or damaged file costs one command's
// asking, and goes when kcached answers it.
// Writers replace the file whole (core/file_io.h WriteFileAtomically): a reader sees one mark.
// Not thread-safe (one launcher command's).
#ifndef KCACHE_CLIENT_LAUNCH_UNRESPONSIVE_MARK_H_
#define KCACHE_CLIENT_LAUNCH_UNRESPONSIVE_MARK_H_

#include <optional>
#include <string>

#include "absl/time/time.h"

namespace kcache::launch {

inline constexpr char kUnresponsiveMarkFile[] = "kcached-unresponsive";
// How long a mark lasts (KCACHE_UNRESPONSIVE_MS).
inline constexpr absl::Duration kDefaultUnresponsiveFor = absl::Seconds(20);

class UnresponsiveMark {
 public:
  // The mark of kcached at `server` in `state_dir`, lasting `lasts`. "" for either: no mark is
  // ever read or written.
  UnresponsiveMark(std::string state_dir, std::string server, absl::Duration lasts);
  // In StateDir() (launch_command.h), lasting KCACHE_UNRESPONSIVE_MS.
  static UnresponsiveMark FromEnvironment(const std::string& server);

  // The end of the mark when one holds now: compile without asking. nullopt when there is
  // none; when the one there is stale, this command is the one that asks again: the mark is
  // renewed for `asking` (how long its asking may take) and probing() is true.
  std::optional<absl::Time> Check(absl::Duration asking);
  bool probing() const { return probing_; }
  // This process carries on the asking another began (kcache-launch's, handed to kcache).
  void set_probing(bool probing) { probing_ = probing; }

  // Marks kcached unresponsive until now + the mark's length; returns that end.
  absl::Time Set();
  // Takes the mark away (kcached answered this command's probe).
  void Clear();

  const std::string& path() const { return path_; }
  absl::Duration lasts() const { return lasts_; }

 private:
  // What the file says: no file, or another server's mark, is not `ours`; a damaged one is
  // ours without an end.
  struct Found {
    bool ours = false;
    std::optional<absl::Time> until;
  };
  Found Read() const;
  void Write(absl::Time until) const;

  std::string path_;  // "" = off
  std::string server_;
  absl::Duration lasts_;
  bool probing_ = false;
};

// "12:34:56.789", local time: how the launchers' KCACHE_LOG lines say a mark's end.
std::string ClockTime(absl::Time time);

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_UNRESPONSIVE_MARK_H_
