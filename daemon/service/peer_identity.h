// Who is at the other end of a call, as the kernel vouches for it rather than as the client
// names itself: the user and process of a unix socket connection (SO_PEERCRED, read when
// kcached accepted it: daemon/host/unix_grpc_listener.h), or the address of a TCP one. What
// per-client bounds are keyed on (a client that calls itself forty names is still one user)
// and what `kcache ls` shows as who put an object.
#ifndef KCACHE_DAEMON_SERVICE_PEER_IDENTITY_H_
#define KCACHE_DAEMON_SERVICE_PEER_IDENTITY_H_

#include <sys/socket.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kcache {

struct Peer {
  // Whose share a request takes: "uid 1000" for a unix socket connection (every process of one
  // user shares it), "ipv4:10.0.0.7" or "ipv6:[fd00::7]" for TCP (every connection from one
  // address), otherwise gRPC's peer string as it is.
  std::string account;
  // In words, for logs and listings: "uid 1000 pid 4242", "ipv4:10.0.0.7:51234".
  std::string words;
};

// The credentials of the process that connected unix socket `fd` (SO_PEERCRED: as of its
// connect, in kcached's pid namespace; pid 0 when the peer's namespace is not visible from it).
absl::StatusOr<ucred> PeerCredentials(int fd);

// Who is connected to socket `fd` (a unix or TCP connection kcached accepted): the kernel's
// credentials for a unix one, the address for TCP; "unknown peer" when neither can be read.
Peer PeerOfSocket(int fd);

// Thread-safe. Remembers the credentials of the connections kcached hands to gRPC, by the
// descriptor gRPC names them by.
class PeerDirectory {
 public:
  // Records that the connection on descriptor `fd`, about to be handed to gRPC
  // (grpc::AddInsecureChannelFromFd, whose peer string for it is "fd:<fd>"), comes from `cred`.
  // Replaces what an earlier connection on that descriptor number left: at most one entry per
  // descriptor number, so the directory is bounded by the descriptor limit.
  void Accepted(int fd, const ucred& cred);

  // Who `grpc_peer` (ServerContext::peer()) is. A unix connection kcached did not record (gRPC
  // bound the socket itself) is the one account "unix socket (credentials unknown)".
  Peer Who(absl::string_view grpc_peer) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, ucred> by_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_PEER_IDENTITY_H_
