// Carries a miss's record (handed_miss_record.h) from kcache-launch to the kcache it execs: a
// sealed memfd left open across the exec, its descriptor's number in KCACHE_HANDED_MISS. kcache
// takes the variable out of its environment and the descriptor out of the process before it
// runs anything, so the compiler's processes inherit neither.
#ifndef KCACHE_CLIENT_LAUNCH_HANDED_MISS_MEMFD_H_
#define KCACHE_CLIENT_LAUNCH_HANDED_MISS_MEMFD_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/launcher/handed_miss.h"

namespace kcache::launch {

// kcache-launch, just before it execs kcache with `argv` (its own, null-terminated) in this
// working directory and environment: puts `miss`, bound to that command, in a sealed memfd
// that stays open across the exec and names it in KCACHE_HANDED_MISS. An error, with nothing
// set and nothing left open, when it cannot (no memfd, a command too large): kcache then does
// the full pass.
absl::Status HandOnMiss(const objects::HandedMiss& miss, char** argv);

// kcache, at the start of a launcher command: takes KCACHE_HANDED_MISS out of the environment
// and, when it names a memfd sealed as HandOnMiss seals one, reads and closes it (a descriptor
// that is not one is left alone: not ours). Returns the record when it is this command's
// (`argv`, the working directory and the environment: BindCommand), whole and of this version.
// NotFound when no record was handed; else why it is refused (handed_miss_record.h).
absl::StatusOr<objects::HandedMiss> TakeHandedMiss(char** argv);

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_HANDED_MISS_MEMFD_H_
