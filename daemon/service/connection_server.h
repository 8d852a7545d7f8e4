// ConnectionServer: the connections of kcached's socket protocols that are not gRPC, over epoll:
// the in-pod fast path (fast_path_server.h) and the Redis door (redis_door_server.h). It owns
// the listener, accepts within a connection cap, reads, keeps each connection's unsent
// replies, re-arms, closes (hang-ups, failed sends, idle connections) and stops; the protocol
// is a ConnectionProtocol, which opens one ConnectionHandler per connection to turn what is
// read into replies.
//
// Threads: `threads` threads share one epoll set (EpollThreads). A connection is served by one
// thread at a time (EPOLLONESHOT), so idle connections cost a descriptor and a little memory,
// never a thread; its handler is called by that thread only, one call at a time. A handler that
// blocks (a store read) blocks one thread.
//
// A connection's turn: send what waits; then read and hand over what was read, within
// max_reads_per_turn reads and max_turn_bytes bytes read and replied; then send, and re-arm:
// for writing while replies (or the handler's work, ConnectionHandler::Waiting) wait, else for
// reading. A turn reads only once everything queued before it is sent, so a client that does not
// read its replies is not read from, and its unsent bytes stay within one turn's replies:
// - kPackets (SOCK_SEQPACKET): each read is one message of at most read_bytes (a longer one
//   is dropped and told to the handler, OnOversized); the turn's replies go out together
//   at its end, one sendmmsg, not one by one: each send wakes the client, and a wake-up of
//   another CPU costs a VM ~20 us, which a pipelined client pays per message.
// - kStream (SOCK_STREAM): each read takes what is there, up to read_bytes; the replies go out
//   after each read, and the turn reads again only once they are all sent.
// A hang-up (EPOLLRDHUP) still reads what the client sent before it, to its end (a launcher's
// last message goes out just before its socket closes); then the replies are sent once, as far
// as the socket takes them, and the connection closed. An error on the socket (EPOLLERR)
// closes it after that one send, unread.
//
// Closing: the descriptor leaves the epoll set; what the client sent and was not read is read
// and dropped (a bounded amount) after a shutdown for writing, so that the close sends no reset
// over the replies before it; the handler is destroyed (by the thread that closed it, or the
// last one to let go of it) and gives back what it held.
#ifndef KCACHE_DAEMON_SERVICE_CONNECTION_SERVER_H_
#define KCACHE_DAEMON_SERVICE_CONNECTION_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/service/epoll_threads.h"

namespace kcache {

class ConnectionHandler;

// How a connection's bytes are cut into what its handler is given.
enum class Framing {
  kStream,   // SOCK_STREAM (unix or TCP): input in pieces of any size; replies are bytes
  kPackets,  // SOCK_SEQPACKET (unix): each read one message, each reply one packet
};

// Where the server listens.
struct ListenAddress {
  // "unix:PATH" (a stale socket file must be gone already) or, for kStream only, "HOST:PORT"
  // (an IPv4 address or localhost; port 0 picks one).
  std::string address;
  // A unix socket's permissions: it is bound owner-only, then widened to this, so that it is
  // never more open than asked, not even briefly.
  mode_t mode = 0600;
  int backlog = 128;  // listen()'s
  // The flag that gave the address ("--fast-socket"): errors name it.
  std::string flag;
};

struct ConnectionServerOptions {
  std::string name;  // in logs: "fast path", "Redis door"
  Framing framing = Framing::kStream;
  int threads = 2;  // serving threads (at least one)
  // Connections open at once; one more is sent ConnectionProtocol::Refusal and closed.
  int max_connections = 256;
  int accepts_per_turn = 64;  // connections accepted before the listener's thread serves others
  // kStream: bytes read at once (each thread's buffer). kPackets: the largest message; a longer
  // one is dropped (ConnectionHandler::OnOversized) and the connection kept.
  size_t read_bytes = 64 << 10;
  int max_reads_per_turn = std::numeric_limits<int>::max();
  // Bytes read plus bytes of replies queued in one turn, after which the turn ends (checked
  // between reads).
  uint64_t max_turn_bytes = std::numeric_limits<uint64_t>::max();
  // SO_SNDBUF and SO_RCVBUF of each connection; 0: the system's.
  int socket_buffer_bytes = 0;
  // A connection that sends and takes nothing for this long is closed (checked about once a
  // second, and never while a thread serves it). Infinite: never.
  absl::Duration idle_timeout = absl::InfiniteDuration();
};

// One connection, as its handler sees it: used by the thread serving it (in the handler's
// calls), never shared. Owned by the server.
class Connection {
 public:
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Unique in the server, never reused; 3 or more.
  uint64_t id() const { return id_; }
  // The socket (-1 once closed): for what the kernel says of its peer (peer_identity.h), not
  // to read or write around the server.
  int descriptor() const { return fd_; }

  // Queues a reply, sent in order after what was queued before it. kPackets: one packet.
  // kStream: appended to the bytes not yet sent.
  void Send(std::string reply);
  // kStream only: the bytes not yet sent, for a handler that appends replies in place.
  std::string* stream_output() { return &stream_; }
  // Bytes queued and not yet sent.
  uint64_t unsent_bytes() const;
  // Bytes held for replies: those not yet sent and, kStream, those sent from a buffer that
  // still holds replies not sent (it is emptied once all of it is sent).
  uint64_t output_bytes() const;

  // Sends `bytes` now, before anything queued (one packet for kPackets), with the descriptor
  // `fd_to_pass` (SCM_RIGHTS) when it is >= 0. For ConnectionProtocol::Open's greeting: the
  // socket is new and has room. FailedPrecondition when the send fails or is cut short.
  absl::Status SendNow(absl::string_view bytes, int fd_to_pass = -1);

  // Nothing more is read; the connection closes once every reply queued is sent.
  void CloseAfterSending() { close_after_sending_ = true; }
  bool closing() const { return close_after_sending_; }

 private:
  friend class ConnectionServer;
  Connection(int fd, uint64_t id, Framing framing) : fd_(fd), id_(id), framing_(framing) {}

  int fd_;  // -1 once closed
  const uint64_t id_;
  const Framing framing_;
  std::unique_ptr<ConnectionHandler> handler_;
  std::deque<std::string> packets_;  // kPackets: replies not yet sent, in order
  uint64_t packet_bytes_ = 0;        // their bytes
  std::string stream_;               // kStream: replies, sent up to stream_sent_
  size_t stream_sent_ = 0;
  // Bytes queued before: with Send (kPackets), or sent and cleared from stream_ (kStream).
  // queued_ + stream_.size() only grows.
  uint64_t queued_ = 0;
  bool close_after_sending_ = false;
  bool peer_gone_ = false;  // read to its end, or EPOLLERR: close after one more send
  bool broken_ = false;     // a send failed: close at the end of the turn
  // Served by a thread now: the idle sweep leaves it. Guarded by the server's mu_.
  bool busy_ = false;
  std::atomic<int64_t> last_active_ns_{0};  // absl::ToUnixNanos of the last read or send
};

// The protocol's side of one connection. Called by the thread serving the connection, one
// call at a time; destroyed when the connection closes (the thread that closed it, or the one
// last holding it; Stop's for those left), where it gives back what it held.
class ConnectionHandler {
 public:
  virtual ~ConnectionHandler() = default;

  // What was read: kStream, the next piece of the byte stream; kPackets, one whole message.
  // Replies go to `c` (Send, stream_output); CloseAfterSending ends the connection.
  virtual void OnInput(Connection& c, absl::string_view input) = 0;
  // kPackets: a message of `bytes` bytes (more than read_bytes) was dropped unread.
  virtual void OnOversized(Connection& c, size_t bytes) {}

  // Asked in a turn before each read, once every reply before it is sent.
  enum class Next {
    kRead,     // read
    kAgain,    // the handler replied without input (work that waited for room): ask again
    kEndTurn,  // read no more this turn (it may have queued a refusal and CloseAfterSending)
  };
  virtual Next BeforeRead(Connection& c) { return Next::kRead; }
  // The turn's replies are sent, as far as the socket took them.
  virtual void EndTurn(Connection& c) {}
  // The connection is about to close: silent past idle_timeout.
  virtual void OnIdle(Connection& c) {}
  // Work waits without new input (a command whose reply waits for room): the connection is
  // served again as soon as its socket takes more, not when the client sends more.
  virtual bool Waiting() const { return false; }
};

// The protocol: one handler per connection. Called by the thread accepting (one at a time).
class ConnectionProtocol {
 public:
  virtual ~ConnectionProtocol() = default;
  // A connection accepted within the cap: its handler, which may greet the client
  // (Connection::SendNow). Null closes the connection.
  virtual std::unique_ptr<ConnectionHandler> Open(Connection& c) = 0;
  // One connection past max_connections: what it is sent (one packet for kPackets) before it
  // is closed. The protocol counts it.
  virtual std::string Refusal() = 0;
};

// Thread-safe: Stop and port from any thread; the serving threads call the protocol and the
// handlers. `protocol` is borrowed and must outlive the server; so must whatever the handlers
// use, until Stop (or the destructor) has returned, which is when the last handler is
// destroyed. An owner therefore declares the server after what its handlers use, and stops it
// first in its own destructor.
class ConnectionServer {
 public:
  ConnectionServer(ConnectionServerOptions options, ConnectionProtocol* protocol);
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;
  ~ConnectionServer() { Stop(); }

  // Binds and listens on `address`, then starts the threads. Called once. InvalidArgument for
  // an address that cannot be parsed (naming address.flag); FailedPrecondition with the
  // system's reason when the socket, the bind, the listen or the epoll set fails.
  absl::Status Start(const ListenAddress& address);
  // Joins the threads, then closes the listener and every connection (their handlers are
  // destroyed before it returns). Idempotent.
  void Stop();

  // The TCP port bound (the one picked for port 0); 0 for a unix socket.
  int port() const { return port_; }
  // Connections open now.
  size_t connections() const;
  // Accepts put off for want of descriptors or memory (accept_rules.h): each leaves the
  // listener alone for kAcceptPause, the connection waiting in the backlog.
  uint64_t accept_failures() const { return accept_failures_.load(); }

 private:
  void Loop();
  void Accept();
  // The connection `id`, marked busy; null when it was closed meanwhile.
  std::shared_ptr<Connection> Take(uint64_t id);
  void Serve(Connection& c, uint32_t events, std::string& buffer);
  void Flush(Connection& c);
  void FlushPackets(Connection& c);
  void FlushStream(Connection& c);
  // Closes `c` or re-arms it; un-marks it busy.
  void Release(const std::shared_ptr<Connection>& c);
  bool Arm(int fd, uint64_t id, uint32_t events, int op);
  // Takes `c` out of the epoll set and closes its descriptor (drained first when `drain`).
  void CloseSocket(Connection& c, bool drain);
  void CloseIdle();
  void Touch(Connection& c);

  const ConnectionServerOptions options_;
  ConnectionProtocol* const protocol_;
  EpollThreads workers_;
  int listener_ = -1;
  int rest_timer_ = -1;  // a timerfd: re-arms the listener once an accept's pause is over
  int port_ = 0;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> accept_failures_{0};
  mutable absl::Mutex mu_;
  // 0, 1 and 2 name the listener, the wake-up and the rest timer.
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 3;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_CONNECTION_SERVER_H_
