// Who this process is, in words, for what it tells others: its host's name, and "uid 1000 pid 42
// on host-a" (the record of who put an object, core/object_entry.h ObjectEntry::put_by, where no
// kcached in between vouches for it; a lease token's owner; a launcher's name to the launchers
// waiting on its compile).
#ifndef KCACHE_CORE_PROCESS_IDENTITY_H_
#define KCACHE_CORE_PROCESS_IDENTITY_H_

#include <string>

namespace kcache {

// gethostname(2); "" when it fails.
std::string HostName();

// "uid 1000 pid 42 on host-a": the real uid and the pid of the calling process, asked now
// (after a fork, the child's).
std::string ThisProcessInWords();

}  // namespace kcache

#endif  // KCACHE_CORE_PROCESS_IDENTITY_H_
