// The main unix socket (--listen unix:///PATH): kcached binds and accepts it itself, reads each
// connection's credentials into a PeerDirectory (daemon/service/peer_identity.h), and hands the
// connection to the gRPC server, which serves it as if it had accepted it. gRPC's own unix
// listener tells the services nothing about who connected; this one lets them key bounds on the
// peer's user and show who put an object.
#ifndef KCACHE_DAEMON_HOST_UNIX_GRPC_LISTENER_H_
#define KCACHE_DAEMON_HOST_UNIX_GRPC_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/service/peer_identity.h"

namespace grpc {
class Server;
}

namespace kcache {

// Thread-safe. One thread accepts; nothing else runs on it.
class UnixGrpcListener {
 public:
  // Binds `path` (prepared: listen_socket.h PrepareSocketPath) with mode 0600 whatever the umask
  // (the caller widens it to --socket-mode once bound) and starts accepting. `server` (started,
  // no listening port of its own) and `peers` are borrowed and must outlive the listener.
  // FailedPrecondition naming the path when it cannot bind.
  static absl::StatusOr<std::unique_ptr<UnixGrpcListener>> Start(const std::string& path,
                                                                 grpc::Server* server,
                                                                 PeerDirectory* peers);
  ~UnixGrpcListener();  // Stop()

  // Stops accepting and closes the listening socket; connections handed over stay with the gRPC
  // server. Idempotent.
  void Stop();

  // Connections accepted and handed over; accepts put off for want of descriptors or memory
  // (daemon/service/accept_rules.h: each followed by a pause, so that a full descriptor table is
  // not a busy loop).
  uint64_t accepted() const { return accepted_.load(); }
  uint64_t failed() const { return failed_.load(); }

 private:
  UnixGrpcListener(int listen_fd, int wake_fd, grpc::Server* server, PeerDirectory* peers);
  void AcceptLoop();

  const int listen_fd_;
  const int wake_fd_;  // an eventfd Stop writes to
  grpc::Server* const server_;
  PeerDirectory* const peers_;
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_UNIX_GRPC_LISTENER_H_
