// FastPath: libkcache's side of kcached's in-pod fast path (docs/client.md, "The fast path";
// the protocol in docs/protocol.md). A worker on the daemon's machine connects to the daemon's
// SOCK_SEQPACKET socket (<the unix socket's path>.fast), maps the daemon's sealed read-only
// arena once per connection, and gets each artifact as a view of that mapping: no copy, no
// gRPC. Internal to libkcache.
//
// Contract of every call: a failure of the fast path never fails a call. nullopt means "not
// served here, ask over gRPC" (no fast socket, a refused or lost connection, a miss, the arena
// full, the lease bound, a deadline, a request too large for a packet). A value is the answer:
//   - OK: FetchedKernel with `bytes` empty, `view` the artifact in the mapping (followed by a
//     NUL), `view_owner` the lease: while any copy of it lives, the daemon keeps the slot and
//     this process keeps the mapping; its destruction gives the lease back (when the
//     connection is still up). The XXH3-64 checksum in the answer was verified over the view.
//   - InvalidArgument: the daemon refused the request as malformed (gRPC would too).
//   - DataLoss: the checksum did not match the view; the bytes are never handed out. Callers
//     (Client) ask over gRPC then, as for nullopt.
//
// Thread-safe: one connection per FastPath, one exchange on it at a time (a mutex), answers
// matched to requests by tag; lease releases are sent from any thread without the mutex. A
// lost connection is replaced on the next call, at most once per second. A forked child never
// uses its parent's connection.
#ifndef KCACHE_CLIENT_LIB_FAST_PATH_H_
#define KCACHE_CLIENT_LIB_FAST_PATH_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kcache/kcache.h"
#include "kcache/v1/fast_path.pb.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache::client {

// The fast socket for `address` ("unix:///run/kcache/kcache.sock" -> "/run/.../kcache.sock.fast",
// a bare absolute path likewise); "" for a TCP address (no descriptor can cross it).
std::string FastSocketFor(const std::string& address);

class FastPath {
 public:
  // `socket_path` "" = off: every call answers nullopt.
  explicit FastPath(std::string socket_path);
  const std::string& socket_path() const { return socket_path_; }
  ~FastPath();
  FastPath(const FastPath&) = delete;
  FastPath& operator=(const FastPath&) = delete;

  using Answer = std::optional<absl::StatusOr<FetchedKernel>>;

  // Connects now, leaving the daemon's hello (and the arena's mapping) to the first call, so
  // the daemon answers it while the caller does other work (a worker reading its manifest).
  // Never blocks; nothing happens when a connection exists or kcached is not there yet.
  void Begin();

  // One Resolve (the request as for gRPC; no_compile is implied: the fast path never compiles).
  Answer Resolve(const v1::ResolveRequest& request, absl::Time deadline);
  // Many, pipelined on the one connection (in windows of 32): answers in the order of
  // `requests`, each as Resolve's. For Client::ResolveMany: the nullopt ones go to gRPC.
  std::vector<Answer> ResolveMany(const std::vector<v1::ResolveRequest>& requests,
                                  absl::Time deadline);

  // Any other operation (the compiler launchers' list_objects and get_object): `request` sent
  // with a tag of this connection's. Answers as Resolve's, the value being the answer's header
  // (size and checksum) and its bytes' view, owned (leased) by `owner`.
  struct View {
    v1::ArtifactHeader header;
    absl::string_view view;
    std::shared_ptr<const void> owner;
  };
  using Viewed = std::optional<absl::StatusOr<View>>;
  Viewed Ask(v1::FastRequest request, absl::Time deadline);
  // A request the daemon does not answer (note_uncached): sent, not waited for. False when it
  // could not be sent (no fast path now).
  bool Tell(const v1::FastRequest& request, absl::Time deadline);

  // Served here, and asked here but left to gRPC (nullopt or DataLoss), since construction.
  uint64_t served() const { return served_.load(); }
  uint64_t fallbacks() const { return fallbacks_.load(); }
  uint64_t checksum_failures() const { return checksum_failures_.load(); }

  struct Connection;  // fast_path.cc; shared with the leases it gave out

 private:
  // The connection, dialed and its hello taken here when there is none (or Begin's, its
  // hello taken now); null when the fast path cannot be had now (then not tried again for a
  // second).
  std::shared_ptr<Connection> Connected(absl::Time deadline);  // mu_ held
  std::shared_ptr<Connection> Dial() const;                    // connected; the hello not read yet
  bool Handshake(Connection& c, absl::Time deadline) const;    // reads the hello, maps the arena
  std::vector<Answer> ResolveAll(const v1::ResolveRequest* const* requests, size_t count,
                                 absl::Time deadline);
  // `count` requests, packet i framed by packet_of(i, tag), pipelined in windows; each answer
  // checked against the arena and its checksum.
  std::vector<Viewed> Exchange(size_t count,
                               const std::function<std::string(size_t, uint64_t)>& packet_of,
                               absl::Time deadline);
  // One window of Exchange: requests [start, end) sent, their answers read into `answers`
  // until each came, the deadline passed or the connection broke (then marked dead).
  void ExchangeWindow(const std::shared_ptr<Connection>& c, size_t start, size_t end,
                      const std::function<std::string(size_t, uint64_t)>& packet_of,
                      absl::Time deadline, std::vector<Viewed>& answers);  // mu_ held
  // What one answer gives: nullopt for a refusal other than InvalidArgument (gRPC asks
  // again), InvalidArgument, DataLoss for a slot outside the arena or a checksum mismatch
  // (counted), else a view of the arena that holds the answer's lease until it goes.
  Viewed Accept(const std::shared_ptr<Connection>& c, v1::FastResponse& response);

  const std::string socket_path_;
  // One exchange at a time. The C library's mutex, not absl's: a worker's start takes it
  // first, and absl::Mutex's first lock in a process (its thread identity; with an absl built
  // without NDEBUG, as Debian's is, the deadlock detector's graph) costs ~50 us of that start.
  std::mutex mu_;
  // Guarded by mu_:
  std::shared_ptr<Connection> connection_;
  absl::Time retry_after_ = absl::InfinitePast();
  uint64_t next_tag_ = 1;
  std::unique_ptr<char[]> buffer_;  // receives answers
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> fallbacks_{0};
  std::atomic<uint64_t> checksum_failures_{0};
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_FAST_PATH_H_
