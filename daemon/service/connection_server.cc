// The connections of kcached's non-gRPC sockets over epoll: accept, read, send, re-arm, close.
#include "daemon/service/connection_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/service/accept_rules.h"

namespace kcache {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kRestTimerId = 2;  // EpollThreads::kWakeId is 1
// Packets one sendmmsg takes at most.
constexpr size_t kPacketsPerSend = 32;
// A stream's reply buffer left larger than this once sent is freed, not kept for the next.
constexpr size_t kKeepCapacity = 1 << 20;

absl::Status Errno(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

// Closes a connection after reading (and dropping) what it sent and was not read, up to a
// bound: closing over unread bytes sends a reset, and the client could lose the last reply.
void DrainAndClose(int fd) {
  shutdown(fd, SHUT_WR);
  char buffer[4096];
  for (int i = 0; i < 256 && recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) > 0; ++i) {
  }
  close(fd);
}

// A listening, non-blocking socket bound to `listen.address`.
absl::StatusOr<int> BindListener(const ListenAddress& listen, Framing framing) {
  absl::string_view address = listen.address;
  sockaddr_storage storage{};
  socklen_t size = 0;
  std::string unix_path;
  if (absl::ConsumePrefix(&address, "unix:")) {
    auto* un = reinterpret_cast<sockaddr_un*>(&storage);
    unix_path = std::string(address);
    if (unix_path.empty() || unix_path.size() >= sizeof(un->sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat(listen.flag, " unix:", unix_path,
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
    if (framing != Framing::kStream || colon == absl::string_view::npos ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535 ||
        inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          listen.flag, " ", address,
          framing == Framing::kStream ? ": give IPV4:PORT (e.g. 127.0.0.1:6390) or unix:PATH"
                                      : ": give a unix socket's path"));
    }
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    size = sizeof(sockaddr_in);
  }
  int type = framing == Framing::kPackets ? SOCK_SEQPACKET : SOCK_STREAM;
  int fd = socket(storage.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Errno(absl::StrCat("socket for ", listen.flag));
  int one = 1;
  if (unix_path.empty()) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // A unix socket is bound owner-only, then widened: never more open than asked.
  mode_t old_umask = umask(0177);
  int bound = bind(fd, reinterpret_cast<sockaddr*>(&storage), size);
  umask(old_umask);
  if (bound != 0 || (!unix_path.empty() && chmod(unix_path.c_str(), listen.mode) != 0) ||
      ::listen(fd, listen.backlog) != 0) {
    absl::Status error = Errno(absl::StrCat("cannot listen on ", listen.flag, " ", listen.address));
    close(fd);
    return error;
  }
  return fd;
}

}  // namespace

void Connection::Send(std::string reply) {
  if (framing_ == Framing::kStream) {
    stream_.append(reply);
    return;
  }
  packet_bytes_ += reply.size();
  queued_ += reply.size();
  packets_.push_back(std::move(reply));
}

uint64_t Connection::unsent_bytes() const {
  return framing_ == Framing::kStream ? stream_.size() - stream_sent_ : packet_bytes_;
}

uint64_t Connection::output_bytes() const {
  return framing_ == Framing::kStream ? stream_.size() : packet_bytes_;
}

absl::Status Connection::SendNow(absl::string_view bytes, int fd_to_pass) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd_to_pass >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd_to_pass, sizeof(int));
  }
  ssize_t sent = sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent < 0) return Errno("sending a new connection its greeting");
  if (static_cast<size_t>(sent) != bytes.size()) {
    return absl::FailedPreconditionError("a new connection's greeting was cut short");
  }
  return absl::OkStatus();
}

ConnectionServer::ConnectionServer(ConnectionServerOptions options, ConnectionProtocol* protocol)
    : options_(std::move(options)), protocol_(protocol) {}

absl::Status ConnectionServer::Start(const ListenAddress& address) {
  absl::StatusOr<int> listener = BindListener(address, options_.framing);
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
    return Errno(absl::StrCat("epoll_ctl for the ", options_.name));
  }
  rest_timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (rest_timer_ < 0 || !Arm(rest_timer_, kRestTimerId, EPOLLIN | EPOLLONESHOT, EPOLL_CTL_ADD)) {
    return Errno(absl::StrCat("the accept pause timer of the ", options_.name));
  }
  workers_.Start(options_.threads, [this] { Loop(); });
  return absl::OkStatus();
}

void ConnectionServer::Stop() {
  if (stopped_.exchange(true)) return;
  workers_.Stop();
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(connections_);
  }
  for (auto& [id, connection] : left) CloseSocket(*connection, /*drain=*/false);
  left.clear();  // the handlers go here, before Stop returns
  if (listener_ >= 0) close(listener_);
  listener_ = -1;
  if (rest_timer_ >= 0) close(rest_timer_);
  rest_timer_ = -1;
}

size_t ConnectionServer::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_.size();
}

bool ConnectionServer::Arm(int fd, uint64_t id, uint32_t events, int op) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  return epoll_ctl(workers_.fd(), op, fd, &ev) == 0;
}

void ConnectionServer::Loop() {
  // A packet one byte longer than read_bytes shows as too long, not as cut to fit.
  std::string buffer(options_.read_bytes + (options_.framing == Framing::kPackets ? 1 : 0), '\0');
  bool idle_bound = options_.idle_timeout != absl::InfiniteDuration();
  epoll_event events[16];
  while (!stopped_.load()) {
    int n = epoll_wait(workers_.fd(), events, 16, idle_bound ? 1000 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: epoll_wait failed: {}", options_.name, std::strerror(errno));
      return;
    }
    for (int i = 0; i < n && !stopped_.load(); ++i) {
      uint64_t id = events[i].data.u64;
      if (id == EpollThreads::kWakeId) return;
      if (id == kListenerId) {
        Accept();
        continue;
      }
      if (id == kRestTimerId) {  // the pause is over: the listener again, and the timer
        uint64_t expirations;
        (void)!read(rest_timer_, &expirations, sizeof(expirations));
        Arm(rest_timer_, kRestTimerId, EPOLLIN | EPOLLONESHOT, EPOLL_CTL_MOD);
        Arm(listener_, kListenerId, EPOLLIN | EPOLLONESHOT, EPOLL_CTL_MOD);
        continue;
      }
      if (std::shared_ptr<Connection> connection = Take(id)) {
        Serve(*connection, events[i].events, buffer);
        Release(connection);
      }
    }
    if (idle_bound) CloseIdle();
  }
}

void ConnectionServer::Accept() {
  for (int i = 0; i < options_.accepts_per_turn; ++i) {
    int fd = AcceptKeepingHeadroom(listener_);
    if (fd < 0) {
      if (!AcceptLackedResources(errno)) break;
      // Re-armed at once, the listener (still readable) would spin a thread: the timer re-arms
      // it after the pause instead.
      if (accept_failures_.fetch_add(1) % 1000 == 0) {
        spdlog::warn(
            "{}: cannot accept a connection: {} (kcached keeps {} descriptors free for "
            "itself; raise the descriptor limit, or fewer clients)",
            options_.name, std::strerror(errno), kDescriptorHeadroom);
      }
      itimerspec pause{};
      pause.it_value = absl::ToTimespec(kAcceptPause);
      if (timerfd_settime(rest_timer_, 0, &pause, nullptr) == 0) return;
      break;
    }
    if (options_.socket_buffer_bytes > 0) {
      const int bytes = options_.socket_buffer_bytes;
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
    }
    uint64_t id = 0;  // none: over the cap
    {
      absl::MutexLock lock(&mu_);
      if (connections_.size() < static_cast<size_t>(options_.max_connections)) id = next_id_++;
    }
    if (id == 0) {
      std::string refusal = protocol_->Refusal();
      (void)!send(fd, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      DrainAndClose(fd);
      continue;
    }
    std::shared_ptr<Connection> connection(new Connection(fd, id, options_.framing));
    connection->last_active_ns_.store(NowNanos());
    connection->handler_ = protocol_->Open(*connection);
    if (connection->handler_ == nullptr) {
      close(fd);
      continue;
    }
    {
      // In the table before it is armed: its first event finds it.
      absl::MutexLock lock(&mu_);
      connections_[id] = connection;
    }
    if (!Arm(fd, id, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, EPOLL_CTL_ADD)) {
      {
        absl::MutexLock lock(&mu_);
        connections_.erase(id);
      }
      CloseSocket(*connection, /*drain=*/false);
    }
  }
  Arm(listener_, kListenerId, EPOLLIN | EPOLLONESHOT, EPOLL_CTL_MOD);
}

std::shared_ptr<Connection> ConnectionServer::Take(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = connections_.find(id);
  if (it == connections_.end()) return nullptr;
  it->second->busy_ = true;
  return it->second;
}

void ConnectionServer::Serve(Connection& c, uint32_t events, std::string& buffer) {
  ConnectionHandler& handler = *c.handler_;
  const bool stream = options_.framing == Framing::kStream;
  if ((events & EPOLLERR) != 0) c.peer_gone_ = true;
  Flush(c);
  const bool backlog = c.unsent_bytes() > 0;  // kPackets: the socket had no room
  auto queued = [&c] { return c.queued_ + c.stream_.size(); };
  uint64_t turn = 0;  // bytes read and replied
  for (int reads = 0; reads < options_.max_reads_per_turn && turn < options_.max_turn_bytes;) {
    if (c.peer_gone_ || c.broken_ || c.close_after_sending_) break;
    if (stream ? c.unsent_bytes() > 0 : backlog) break;
    uint64_t before = queued();
    ConnectionHandler::Next next = handler.BeforeRead(c);
    turn += queued() - before;
    if (next == ConnectionHandler::Next::kEndTurn) break;
    if (next == ConnectionHandler::Next::kAgain) {
      if (stream) Flush(c);
      continue;
    }
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;  // no control buffer: descriptors a client sends are dropped
    ssize_t got = recvmsg(c.fd_, &msg, MSG_DONTWAIT | (stream ? 0 : MSG_TRUNC));
    if (got == 0) {
      c.peer_gone_ = true;
      break;
    }
    if (got < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.peer_gone_ = true;
      break;
    }
    ++reads;
    turn += static_cast<uint64_t>(got);
    Touch(c);
    before = queued();
    size_t size = static_cast<size_t>(got);
    if (!stream && (size > options_.read_bytes || (msg.msg_flags & MSG_TRUNC) != 0)) {
      handler.OnOversized(c, size);
    } else {
      handler.OnInput(c, absl::string_view(buffer.data(), size));
    }
    turn += queued() - before;
    if (stream) Flush(c);
  }
  Flush(c);
  handler.EndTurn(c);
}

void ConnectionServer::Flush(Connection& c) {
  if (options_.framing == Framing::kStream) {
    FlushStream(c);
  } else {
    FlushPackets(c);
  }
}

// As many packets a system call as the queue holds, up to kPacketsPerSend.
void ConnectionServer::FlushPackets(Connection& c) {
  while (!c.packets_.empty() && !c.broken_) {
    size_t n = std::min(c.packets_.size(), kPacketsPerSend);
    iovec iovs[kPacketsPerSend];
    mmsghdr messages[kPacketsPerSend];
    for (size_t i = 0; i < n; ++i) {
      iovs[i] = iovec{c.packets_[i].data(), c.packets_[i].size()};
      messages[i] = mmsghdr{};
      messages[i].msg_hdr.msg_iov = &iovs[i];
      messages[i].msg_hdr.msg_iovlen = 1;
    }
    int sent = sendmmsg(c.fd_, messages, static_cast<unsigned>(n), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent > 0) {
      for (int i = 0; i < sent; ++i) {
        c.packet_bytes_ -= c.packets_.front().size();
        c.packets_.pop_front();
      }
      Touch(c);
      continue;
    }
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT resumes
    if (sent < 0 && errno == EINTR) continue;
    c.broken_ = true;
  }
}

void ConnectionServer::FlushStream(Connection& c) {
  while (!c.broken_ && c.stream_sent_ < c.stream_.size()) {
    ssize_t sent = send(c.fd_, c.stream_.data() + c.stream_sent_, c.stream_.size() - c.stream_sent_,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.broken_ = true;
      break;
    }
    c.stream_sent_ += static_cast<size_t>(sent);
    Touch(c);
  }
  if (c.stream_sent_ == c.stream_.size()) {
    c.queued_ += c.stream_.size();
    c.stream_sent_ = 0;
    if (c.stream_.capacity() > kKeepCapacity) {
      std::string().swap(c.stream_);
    } else {
      c.stream_.clear();
    }
  }
}

void ConnectionServer::Release(const std::shared_ptr<Connection>& c) {
  bool close_now = false;
  {
    // Re-armed under the lock, after busy_ is cleared: the idle sweep then never closes a
    // connection another thread has been woken for.
    absl::MutexLock lock(&mu_);
    c->busy_ = false;
    bool pending = c->unsent_bytes() > 0;
    close_now = c->peer_gone_ || c->broken_ || (c->close_after_sending_ && !pending);
    if (!close_now) {
      uint32_t events =
          (pending || c->handler_->Waiting() ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP | EPOLLONESHOT;
      close_now = !Arm(c->fd_, c->id_, events, EPOLL_CTL_MOD);
    }
    if (close_now) connections_.erase(c->id_);
  }
  if (close_now) CloseSocket(*c, /*drain=*/true);
}

void ConnectionServer::CloseSocket(Connection& c, bool drain) {
  if (c.fd_ < 0) return;
  epoll_ctl(workers_.fd(), EPOLL_CTL_DEL, c.fd_, nullptr);
  if (drain) {
    DrainAndClose(c.fd_);
  } else {
    close(c.fd_);
  }
  c.fd_ = -1;
}

void ConnectionServer::CloseIdle() {
  absl::Time now = absl::Now();
  std::vector<std::shared_ptr<Connection>> idle;
  {
    absl::MutexLock lock(&mu_);
    if (now - last_sweep_ < absl::Seconds(1)) return;
    last_sweep_ = now;
    for (auto& [id, connection] : connections_) {
      absl::Time last_active = absl::FromUnixNanos(connection->last_active_ns_.load());
      if (!connection->busy_ && now - last_active > options_.idle_timeout) {
        idle.push_back(connection);
      }
    }
    for (const auto& connection : idle) connections_.erase(connection->id_);
  }
  for (const auto& connection : idle) {
    connection->handler_->OnIdle(*connection);
    CloseSocket(*connection, /*drain=*/true);
  }
}

void ConnectionServer::Touch(Connection& c) { c.last_active_ns_.store(NowNanos()); }

}  // namespace kcache
