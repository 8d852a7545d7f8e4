// The Redis door's listener and connections: an epoll loop over non-blocking sockets.
#include "daemon/service/redis_door_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/byte_budget.h"
#include "daemon/service/epoll_threads.h"

namespace kcache {
namespace {

// Counts `count` in its redis.* statistic (a gauge, kConnections, moves by `n`).
void Count(Statistics& stats, RedisDoorCount count, int64_t n) {
  using C = RedisDoorCount;
  using S = Statistic;
  static constexpr std::pair<C, S> kStatistics[] = {
      {C::kHit, S::kRedisHits},
      {C::kMiss, S::kRedisMisses},
      {C::kBytesIn, S::kRedisBytesIn},
      {C::kBytesOut, S::kRedisBytesOut},
      {C::kSet, S::kRedisSets},
      {C::kRefusedValueTooBig, S::kRedisRefusedValueTooBig},
      {C::kRefusedNamespace, S::kRedisRefusedNamespace},
      {C::kRefusedCommand, S::kRedisRefusedCommand},
      {C::kRefusedProtocol, S::kRedisRefusedProtocol},
      {C::kRefusedConnections, S::kRedisRefusedConnections},
      {C::kRefusedBuffer, S::kRedisRefusedBuffer},
      {C::kIdleClosed, S::kRedisIdleClosed},
      {C::kStoreError, S::kRedisStoreErrors},
      {C::kConnections, S::kRedisConnections},
      {C::kRefusedDriverTooOld, S::kRedisRefusedDriverTooOld},
      {C::kRefusedToolkitUnknown, S::kRedisRefusedToolkitUnknown},
      {C::kRefusedTotal, S::kRedisRefusedTotal},
      {C::kRefusedKeyTooBig, S::kRedisRefusedKeyTooBig},
  };
  static_assert(
      [] {
        for (size_t i = 0; i < std::size(kStatistics); ++i) {
          if (static_cast<size_t>(kStatistics[i].first) != i) return false;
        }
        return static_cast<size_t>(C::kRefusedKeyTooBig) + 1 == std::size(kStatistics);
      }(),
      "a statistic for every RedisDoorCount, in the enum's order");
  stats.Move(kStatistics[static_cast<size_t>(count)].second, n);
}

constexpr uint64_t kListenerId = 0;
constexpr size_t kReadBytes = 64 << 10;
// Bytes read from one connection per turn before the thread serves another.
constexpr size_t kTurnBytes = 4 << 20;
// What a connection may hold whatever the others hold (--redis-max-total-bytes aside): a
// small command and its reply always go through, so a client is answered under any load.
constexpr uint64_t kSmallBytes = RedisCommands::kSmallReplyBytes;
// A buffer left larger than this once empty is freed, not kept for the next command.
constexpr size_t kKeepCapacity = 1 << 20;

// Served by one thread at a time (`busy`, under the server's mutex); Stop touches it only
// after every thread has ended.
struct Connection {
  Connection(int fd_in, uint64_t id_in, const resp::ParserLimits& limits)
      : fd(fd_in), id(id_in), parser(limits) {}
  const int fd;
  const uint64_t id;
  resp::Parser parser;
  RedisSession session;
  // A command parsed but not answered: its reply waits for the client to read what is sent.
  std::optional<resp::Command> waiting;
  uint64_t waiting_bytes = 0;  // its arguments'
  std::string out;             // replies, sent up to out_sent
  size_t out_sent = 0;
  uint64_t charged = 0;            // what this connection holds in the door's ByteBudget
  bool close_after_flush = false;  // QUIT, a framing error, or over a buffer bound
  bool closed = false;             // the peer went away or a send failed
  bool busy = false;               // a thread serves it now (guarded by the server's mu_)
  absl::Time last_active;          // guarded by the server's mu_

  uint64_t unsent() const { return out.size() - out_sent; }
  // What it holds: input not yet answered, the command waiting, replies not yet sent.
  uint64_t held() const { return parser.buffered() + waiting_bytes + unsent(); }
};

uint64_t ArgumentBytes(const resp::Command& command) {
  uint64_t bytes = 0;
  for (const std::string& arg : command.args) bytes += arg.size();
  return bytes;
}

absl::Status Errno(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Closes a connection after reading (and dropping) what it sent and we did not read, up to a
// bound: closing over unread bytes sends a reset, and the client could lose the last reply.
void DrainAndClose(int fd) {
  shutdown(fd, SHUT_WR);
  char buffer[4096];
  for (int i = 0; i < 256 && recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) > 0; ++i) {
  }
  close(fd);
}

// A listening, non-blocking socket bound to `address` ("unix:PATH" or "HOST:PORT").
absl::StatusOr<int> BindListener(absl::string_view address, mode_t mode) {
  sockaddr_storage storage{};
  socklen_t size = 0;
  std::string unix_path;
  if (absl::ConsumePrefix(&address, "unix:")) {
    auto* un = reinterpret_cast<sockaddr_un*>(&storage);
    unix_path = std::string(address);
    if (unix_path.empty() || unix_path.size() >= sizeof(un->sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat("--redis-listen unix:", unix_path,
                                                     ": give a path of 1 to ",
                                                     sizeof(un->sun_path) - 1, " bytes"));
    }
    un->sun_family = AF_UNIX;
    std::memcpy(un->sun_path, unix_path.data(), unix_path.size());
    size = sizeof(sockaddr_un);
  } else {
    size_t colon = address.rfind(':');
    int port = -1;
    std::string host(address.substr(0, colon == absl::string_view::npos ? 0 : colon));
    if (host == "localhost") host = "127.0.0.1";
    auto* in = reinterpret_cast<sockaddr_in*>(&storage);
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
        port < 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--redis-listen ", address, ": give IPV4:PORT (e.g. 127.0.0.1:6390) or unix:PATH"));
    }
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    size = sizeof(sockaddr_in);
  }
  int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Errno("socket for --redis-listen");
  int one = 1;
  if (unix_path.empty()) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // A unix socket is bound owner-only, then widened: never more open than asked.
  mode_t old_umask = umask(0177);
  int bound = bind(fd, reinterpret_cast<sockaddr*>(&storage), size);
  umask(old_umask);
  if (bound != 0 || (!unix_path.empty() && chmod(unix_path.c_str(), mode) != 0) ||
      listen(fd, 1024) != 0) {
    absl::Status error = Errno(absl::StrCat("cannot listen on --redis-listen ", address));
    close(fd);
    return error;
  }
  return fd;
}

class RedisDoorServerImpl final : public RedisDoorServer {
 public:
  RedisDoorServerImpl(objects::ObjectCache* objects, Statistics* stats, RedisDoorOptions options)
      : stats_(stats),
        options_(std::move(options)),
        commands_(objects, options_.commands,
                  [stats](RedisDoorCount count, int64_t n) { Count(*stats, count, n); }),
        budget_(options_.max_total_bytes, stats, Statistic::kRedisHeldBytes) {
    limits_.max_argument_bytes = options_.commands.max_value_bytes;
  }
  ~RedisDoorServerImpl() override { Stop(); }

  absl::Status Listen() {
    absl::StatusOr<int> listener = BindListener(options_.listen, options_.socket_mode);
    if (!listener.ok()) return listener.status();
    listener_ = *listener;
    sockaddr_in bound{};
    socklen_t size = sizeof(bound);
    if (getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &size) == 0 &&
        bound.sin_family == AF_INET) {
      port_ = ntohs(bound.sin_port);
    }
    if (absl::Status s = workers_.Open(); !s.ok()) return s;
    if (!Arm(listener_, kListenerId, EPOLLIN | EPOLLONESHOT, EPOLL_CTL_ADD)) {
      return Errno("epoll_ctl for the Redis door");
    }
    workers_.Start(options_.threads, [this] { Loop(); });
    return absl::OkStatus();
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    workers_.Stop();
    absl::MutexLock lock(&mu_);
    for (auto& [id, connection] : connections_) {
      close(connection->fd);
      budget_.Recharge(&connection->charged, 0);
    }
    Count(*stats_, RedisDoorCount::kConnections, -static_cast<int64_t>(connections_.size()));
    connections_.clear();
    if (listener_ >= 0) close(listener_);
    listener_ = -1;
  }

  int port() const override { return port_; }

 private:
  bool Arm(int fd, uint64_t id, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    return epoll_ctl(workers_.fd(), op, fd, &ev) == 0;
  }

  void Loop() {
    std::string buffer(kReadBytes, '\0');
    epoll_event events[16];
    while (!stopped_.load()) {
      int n = epoll_wait(workers_.fd(), events, 16, 1000);
      if (n < 0 && errno != EINTR) {
        spdlog::error("Redis door: epoll_wait failed: {}", std::strerror(errno));
        return;
      }
      for (int i = 0; i < n && !stopped_.load(); ++i) {
        uint64_t id = events[i].data.u64;
        if (id == EpollThreads::kWakeId) return;
        if (id == kListenerId) {
          Accept();
          continue;
        }
        if (std::shared_ptr<Connection> connection = Take(id)) {
          Serve(*connection, buffer);
          Release(connection);
        }
      }
      CloseIdle();
    }
  }

  void Accept() {
    for (int i = 0; i < 64; ++i) {
      int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      absl::MutexLock lock(&mu_);
      if (connections_.size() >= static_cast<size_t>(options_.max_connections)) {
        std::string refusal;
        resp::AppendError(refusal, absl::StrCat("ERR max number of clients reached: kcached's "
                                                "Redis door serves at most ",
                                                options_.max_connections,
                                                " connections (--redis-max-connections)"));
        (void)!send(fd, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        DrainAndClose(fd);
        Count(*stats_, RedisDoorCount::kRefusedConnections, 1);
        continue;
      }
      auto connection = std::make_shared<Connection>(fd, next_id_++, limits_);
      connection->session.id = static_cast<int64_t>(connection->id);
      connection->last_active = absl::Now();
      if (!Arm(fd, connection->id, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, EPOLL_CTL_ADD)) {
        close(fd);
        continue;
      }
      connections_[connection->id] = connection;
      Count(*stats_, RedisDoorCount::kConnections, 1);
    }
    Arm(listener_, kListenerId, EPOLLIN | EPOLLONESHOT, EPOLL_CTL_MOD);
  }

  // The connection `id`, marked busy; null when it was closed meanwhile (idle).
  std::shared_ptr<Connection> Take(uint64_t id) {
    absl::MutexLock lock(&mu_);
    auto it = connections_.find(id);
    if (it == connections_.end()) return nullptr;
    it->second->busy = true;
    return it->second;
  }

  // Closes the connection or re-arms it: for writing while replies or a command wait, else for
  // reading.
  void Release(const std::shared_ptr<Connection>& c) {
    absl::MutexLock lock(&mu_);
    c->busy = false;
    bool pending = c->unsent() > 0;
    if (c->closed || (c->close_after_flush && !pending)) return CloseLocked(*c);
    // A command waiting for room is served again as soon as the socket takes more.
    uint32_t events = (pending || c->waiting ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP | EPOLLONESHOT;
    if (!Arm(c->fd, c->id, events, EPOLL_CTL_MOD)) CloseLocked(*c);
  }

  void CloseLocked(Connection& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    epoll_ctl(workers_.fd(), EPOLL_CTL_DEL, c.fd, nullptr);
    DrainAndClose(c.fd);
    budget_.Recharge(&c.charged, 0);
    connections_.erase(c.id);
    Count(*stats_, RedisDoorCount::kConnections, -1);
  }

  void CloseIdle() {
    absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    if (now - last_sweep_ < absl::Seconds(1)) return;
    last_sweep_ = now;
    std::vector<std::shared_ptr<Connection>> idle;
    for (auto& [id, connection] : connections_) {
      if (!connection->busy && now - connection->last_active > options_.idle_timeout) {
        idle.push_back(connection);
      }
    }
    for (const auto& connection : idle) CloseLocked(*connection);
    Count(*stats_, RedisDoorCount::kIdleClosed, static_cast<int64_t>(idle.size()));
  }

  // One turn: send what waits; answer the commands read before, as far as their replies fit;
  // then, only once every reply is sent, read and answer more. A client that does not read
  // its replies is not read from.
  void Serve(Connection& c, std::string& buffer) {
    Flush(c);
    size_t this_turn = 0;  // bytes read and answered
    while (!c.closed && !c.close_after_flush && c.unsent() == 0 && this_turn < kTurnBytes) {
      if (c.waiting) {  // every reply before it is sent: it is answered now, or refused
        size_t before = c.out.size();
        Answer(c);
        this_turn += c.out.size() - before;
        Flush(c);
        continue;
      }
      if (c.held() >= kSmallBytes && budget_.room() < kReadBytes) {
        RefuseOverTotal(c);
        break;
      }
      ssize_t got = recv(c.fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        c.closed = true;
        break;
      }
      if (got < 0) break;
      this_turn += static_cast<size_t>(got);
      Touch(c);
      c.parser.Feed(absl::string_view(buffer.data(), static_cast<size_t>(got)));
      budget_.Recharge(&c.charged, c.held());
      size_t before = c.out.size();
      Answer(c);
      this_turn += c.out.size() - before;
      Flush(c);
    }
    budget_.Recharge(&c.charged, c.held());
  }

  // More input would pass --redis-max-total-bytes, and this connection holds an unfinished
  // command of its own: refused (it cannot be framed past the bytes dropped), then closed.
  void RefuseOverTotal(Connection& c) {
    Count(*stats_, RedisDoorCount::kRefusedTotal, 1);
    resp::AppendError(c.out,
                      absl::StrCat("ERR kcached's Redis door holds ", budget_.held(),
                                   " bytes for all its connections, at --redis-max-total-bytes ",
                                   budget_.limit(), ": this connection's unfinished command of ",
                                   c.parser.buffered(), " bytes is dropped; retry later"));
    c.close_after_flush = true;
    Flush(c);
  }

  // The room a reply has now: this connection's bound less what it holds, and the door's
  // total less what every connection holds (small replies always fit: kSmallBytes).
  uint64_t ReplyRoom(const Connection& c) const {
    uint64_t held = c.parser.buffered() + c.unsent();
    uint64_t own = held >= options_.max_buffer_bytes ? 0 : options_.max_buffer_bytes - held;
    return std::min(own, std::max(budget_.room(), kSmallBytes));
  }

  // Answers the commands read, in order, while their replies fit (the command waiting
  // first); stops at one that does not fit while replies wait to be sent (asked again once
  // they are), and refuses one that does not fit with nothing to wait for.
  void Answer(Connection& c) {
    while (!c.close_after_flush) {
      if (!c.waiting) {
        absl::StatusOr<std::optional<resp::Command>> command = c.parser.Next();
        if (!command.ok()) {
          Count(*stats_, RedisDoorCount::kRefusedProtocol, 1);
          resp::AppendError(
              c.out, absl::StrCat("ERR ", command.status().message(), "; closing the connection"));
          c.close_after_flush = true;
          return;
        }
        if (!*command) break;
        c.waiting = std::move(*command);
        c.waiting_bytes = ArgumentBytes(*c.waiting);
      }
      RedisExecuted done = commands_.Execute(*c.waiting, c.session, &c.out, ReplyRoom(c));
      if (!done.answered) {
        if (c.unsent() > 0) break;  // the client reads what waits first
        RefuseReply(c, done.needed);
      }
      c.waiting.reset();
      c.waiting_bytes = 0;
      if (c.session.quit) c.close_after_flush = true;
    }
    if (c.parser.buffered() + c.unsent() > options_.max_buffer_bytes) {
      Count(*stats_, RedisDoorCount::kRefusedBuffer, 1);
      resp::AppendError(c.out, absl::StrCat("ERR over kcached's --redis-max-buffer-bytes ",
                                            options_.max_buffer_bytes,
                                            " of unanswered input; closing the connection"));
      c.close_after_flush = true;
    }
  }

  // A reply of `needed` bytes that does not fit with no other reply of this connection's
  // waiting: over the connection's bound, or over the door's total now.
  void RefuseReply(Connection& c, uint64_t needed) {
    uint64_t input = c.parser.buffered();
    if (needed + input > options_.max_buffer_bytes) {
      Count(*stats_, RedisDoorCount::kRefusedBuffer, 1);
      resp::AppendError(
          c.out, absl::StrCat("ERR a reply of ", needed, " bytes (beside ", input,
                              " bytes of input read) is over kcached's --redis-max-buffer-bytes ",
                              options_.max_buffer_bytes, ": not sent; ask for less at once"));
      return;
    }
    Count(*stats_, RedisDoorCount::kRefusedTotal, 1);
    resp::AppendError(c.out, absl::StrCat("ERR kcached's Redis door holds ", budget_.held(),
                                          " bytes for all its connections: a reply of ", needed,
                                          " bytes would pass --redis-max-total-bytes ",
                                          budget_.limit(), "; retry later"));
  }

  void Flush(Connection& c) {
    while (!c.closed && c.out_sent < c.out.size()) {
      ssize_t sent = send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                          MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.closed = true;
        break;
      }
      c.out_sent += static_cast<size_t>(sent);
      Touch(c);
    }
    if (c.out_sent == c.out.size()) {
      c.out_sent = 0;
      if (c.out.capacity() > kKeepCapacity) {
        std::string().swap(c.out);
      } else {
        c.out.clear();
      }
    }
    budget_.Recharge(&c.charged, c.held());
  }

  void Touch(Connection& c) {
    absl::MutexLock lock(&mu_);
    c.last_active = absl::Now();
  }

  Statistics* const stats_;
  const RedisDoorOptions options_;
  const RedisCommands commands_;
  ByteBudget budget_;  // what every connection holds (--redis-max-total-bytes)
  resp::ParserLimits limits_;
  EpollThreads workers_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopped_{false};
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 2;  // 0 and 1 are the listener's and the wake's
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<RedisDoorServer>> RedisDoorServer::Start(
    objects::ObjectCache* objects, Statistics* stats, RedisDoorOptions options) {
  if (options.max_buffer_bytes < options.commands.max_value_bytes + (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--redis-max-buffer-bytes ", options.max_buffer_bytes,
        " must be at least --redis-max-value-bytes + 1 MiB: a SET of the largest value must fit"));
  }
  if (options.max_total_bytes < options.max_buffer_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis-max-total-bytes ", options.max_total_bytes,
                     " must be at least --redis-max-buffer-bytes ", options.max_buffer_bytes,
                     ": one connection's command of the largest value must fit"));
  }
  auto server = std::make_unique<RedisDoorServerImpl>(objects, stats, std::move(options));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return std::unique_ptr<RedisDoorServer>(std::move(server));
}

}  // namespace kcache
