// How kcached's accept loops (the main socket, the probe port, the fast path, the Redis door)
// take connections when the process is short of descriptors. Clients must never be the ones
// that fill the descriptor table: the rest of kcached (gRPC, whose error paths do not survive
// EMFILE; RocksDB; compile workers; fast-path leases) would meet the full table instead, at
// random. So a connection is accepted only while kDescriptorHeadroom descriptors stay free
// after it; otherwise it waits in the kernel's backlog and the loop rests kAcceptPause.
#ifndef KCACHE_DAEMON_SERVICE_ACCEPT_RULES_H_
#define KCACHE_DAEMON_SERVICE_ACCEPT_RULES_H_

#include "absl/time/time.h"

namespace kcache {

// Descriptors kept free for kcached itself.
inline constexpr int kDescriptorHeadroom = 32;

// A loop that could not accept for want of descriptors or memory leaves its port alone this
// long: the port stays readable, and polling it again at once spins a core.
inline constexpr absl::Duration kAcceptPause = absl::Milliseconds(20);

// Accepts one connection from `listen_fd` (SOCK_CLOEXEC | SOCK_NONBLOCK) when kDescriptorHeadroom
// descriptors stay free after it (probed by duplicating `listen_fd`, closed again at once).
// Returns the descriptor, or -1 with errno: EMFILE when the headroom is not there (nothing was
// accepted), else accept4's (EAGAIN: none waits).
int AcceptKeepingHeadroom(int listen_fd);

// Whether an accept failed with `error` for want of descriptors or memory (EMFILE, ENFILE,
// ENOBUFS, ENOMEM): the caller rests kAcceptPause and counts it.
bool AcceptLackedResources(int error);

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_ACCEPT_RULES_H_
