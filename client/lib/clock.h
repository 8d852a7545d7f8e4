// Now: libkcache's clock, the C library's wall clock (clock_gettime) read as an absl::Time.
// Internal to libkcache.
//
// Not absl::Now(): the abseil this builds with (20220623) recalibrates absl::Now() under a
// process-wide spin lock. A worker that forks (Python multiprocessing, gunicorn) while one of
// its threads holds that lock leaves the child a copy that nobody will release, and every
// absl::Now() there that needs to recalibrate waits forever. libkcache's own threads (the call
// watchdog above all, which wakes on every call) read this clock instead, so they never hold it.
#ifndef KCACHE_CLIENT_LIB_CLOCK_H_
#define KCACHE_CLIENT_LIB_CLOCK_H_

#include <chrono>

#include "absl/time/time.h"

namespace kcache::client {

inline absl::Time Now() { return absl::FromChrono(std::chrono::system_clock::now()); }

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_CLOCK_H_
