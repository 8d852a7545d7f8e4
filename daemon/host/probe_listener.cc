#include "daemon/host/probe_listener.h"

#include <fcntl.h>
#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "daemon/host/metrics.h"
#include "daemon/service/accept_rules.h"

namespace kcache {
namespace {

constexpr absl::string_view kHttp2Preface = "PRI ";  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
constexpr size_t kMaxRequestHead = 16 << 10;

// Sent when max_http_connections requests are being answered already.
constexpr absl::string_view kBusyResponse =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
    "Connection: close\r\n\r\nbusy\n";

void SetSendTimeout(int fd, absl::Duration timeout) {
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, bool head_only, absl::string_view extra = "") {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n", extra,
                      "\r\n", head_only ? "" : body);
}

}  // namespace

class ProbeListener::Impl {
 public:
  // Owns the descriptors: the bound listening socket (non-blocking) and both ends of the pipe
  // Stop writes to and EventLoop polls.
  Impl(ProbeListenerOptions options, int listen_fd, int wake_read, int wake_write)
      : options_(std::move(options)),
        listen_fd_(listen_fd),
        wake_read_(wake_read),
        wake_write_(wake_write) {
    loop_thread_ = std::thread([this] { EventLoop(); });
  }

  ~Impl() { Stop(); }

  uint64_t failed() const { return failed_.load(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    char byte = 1;
    [[maybe_unused]] ssize_t n = write(wake_write_, &byte, 1);
    loop_thread_.join();  // closes the connections still waiting for a request
    close(listen_fd_);
    close(wake_read_);
    close(wake_write_);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* answering) { return *answering == 0; }, &answering_));
  }

 private:
  // A connection accepted and not yet told apart: no thread waits on it, the loop polls it.
  struct Pending {
    int fd = -1;
    absl::Time deadline;  // closed when its request has not come by then
    absl::Time recheck;   // a partial protocol preface: look again then
    std::string head;     // HTTP/1 request bytes read so far
  };

  // One thread polls the port and every connection waiting for its first bytes, so an idle
  // connection costs a descriptor and never a thread: idle connections cannot starve probes.
  // Past max_pending_connections, the oldest waiting connection is closed for the new one.
  void EventLoop() {
    std::deque<Pending> pending;  // oldest first
    std::vector<pollfd> fds;
    // After an accept that failed for want of descriptors the port is not polled for a moment:
    // it stays readable, and polling it again at once would spin a core until descriptors free.
    absl::Time accept_again = absl::InfinitePast();
    while (true) {
      absl::Time now = absl::Now();
      absl::Time wake = absl::InfiniteFuture();
      const bool accepting = accept_again <= now;
      if (!accepting) wake = accept_again;
      fds.assign(
          {{listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0}, {wake_read_, POLLIN, 0}});
      for (const Pending& p : pending) {
        bool armed = p.recheck <= now;
        fds.push_back({p.fd, static_cast<short>(armed ? POLLIN : 0), 0});
        wake = std::min(wake, armed ? p.deadline : std::min(p.deadline, p.recheck));
      }
      int timeout_ms =
          wake == absl::InfiniteFuture()
              ? -1
              : static_cast<int>(absl::ToInt64Milliseconds(
                    absl::Ceil(std::max(wake - now, absl::ZeroDuration()), absl::Milliseconds(1))));
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
      if (fds[1].revents != 0) break;  // Stop
      now = absl::Now();
      std::deque<Pending> still;
      for (size_t i = 0; i < pending.size(); ++i) {
        Pending& p = pending[i];
        short revents = fds[i + 2].revents;
        if (revents != 0 && !Progress(p, now)) continue;  // handed over or closed
        if (revents == 0 && p.deadline <= now) {
          close(p.fd);
          continue;
        }
        still.push_back(std::move(p));
      }
      pending.swap(still);
      if (fds[0].revents != 0 && !AcceptAll(&pending, now)) {
        accept_again = now + kAcceptPause;
      }
    }
    for (Pending& p : pending) close(p.fd);
  }

  // Accepts what waits; false when an accept failed for want of descriptors or memory.
  bool AcceptAll(std::deque<Pending>* pending, absl::Time now) {
    while (true) {
      int fd = AcceptKeepingHeadroom(listen_fd_);
      if (fd < 0) {  // none left (EAGAIN), the peer gave up, or out of descriptors
        if (!AcceptLackedResources(errno)) return true;
        failed_.fetch_add(1);
        return false;
      }
      if (pending->size() >= static_cast<size_t>(std::max(options_.max_pending_connections, 1))) {
        close(pending->front().fd);  // the oldest idle one makes room: probes get through
        pending->pop_front();
      }
      pending->push_back({fd, now + options_.read_timeout, absl::InfinitePast(), ""});
    }
  }

  // Reads what `p` sent. False when the connection left the loop (handed to gRPC, handed to
  // a thread to answer, or closed); true while its request is still incomplete.
  bool Progress(Pending& p, absl::Time now) {
    if (p.head.empty()) {
      char start[4];
      ssize_t n = recv(p.fd, start, sizeof(start), MSG_PEEK);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (n <= 0) {  // closed, or an error
        close(p.fd);
        return false;
      }
      absl::string_view seen(start, static_cast<size_t>(n));
      if (seen.size() < kHttp2Preface.size() && absl::StartsWith(kHttp2Preface, seen)) {
        p.recheck = now + absl::Milliseconds(2);  // may be a gRPC preface: wait for more
        return true;
      }
      if (seen == kHttp2Preface) {
        HandOverToGrpc(p.fd);
        return false;
      }
    }
    char buf[2048];
    ssize_t n = recv(p.fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) {
      close(p.fd);
      return false;
    }
    p.head.append(buf, static_cast<size_t>(n));
    if (absl::StrContains(p.head, "\r\n\r\n")) {
      Answer(p.fd, std::move(p.head));
      return false;
    }
    if (p.head.size() >= kMaxRequestHead) {
      close(p.fd);
      return false;
    }
    return true;
  }

  void HandOverToGrpc(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    grpc::AddInsecureChannelFromFd(options_.grpc_server, fd);  // takes the descriptor
  }

  // Answers a complete request head on a short-lived thread (rendering /metrics reads the
  // stores), at most max_http_connections at once; past that, 503 at once.
  void Answer(int fd, std::string head) {
    {
      absl::MutexLock lock(&mu_);
      if (answering_ < options_.max_http_connections) {
        ++answering_;
        std::thread([this, fd, head = std::move(head)] {
          fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
          SetSendTimeout(fd, options_.read_timeout);
          AnswerHttp(fd, head);
          close(fd);
          absl::MutexLock lock(&mu_);
          --answering_;
        }).detach();
        return;
      }
    }
    send(fd, kBusyResponse.data(), kBusyResponse.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
  }

  void AnswerHttp(int fd, const std::string& head) {
    std::vector<absl::string_view> line =
        absl::StrSplit(absl::string_view(head).substr(0, head.find("\r\n")), ' ');
    if (line.size() != 3 || !absl::StartsWith(line[2], "HTTP/1.")) {
      SendAll(fd, Response("400 Bad Request", "text/plain", "bad request line\n", false));
      return;
    }
    absl::string_view method = line[0];
    absl::string_view path = line[1].substr(0, line[1].find('?'));
    bool head_only = method == "HEAD";
    if (method != "GET" && !head_only) {
      SendAll(fd, Response("405 Method Not Allowed", "text/plain", "only GET and HEAD\n", false,
                           "Allow: GET, HEAD\r\n"));
      return;
    }
    if (path == "/metrics") {
      SendAll(fd, Response("200 OK", kMetricsContentType, options_.metrics(), head_only));
    } else if (path == "/healthz") {
      bool serving = options_.serving();
      SendAll(fd, Response(serving ? "200 OK" : "503 Service Unavailable", "text/plain",
                           serving ? "SERVING\n" : "NOT_SERVING\n", head_only));
    } else {
      SendAll(fd, Response("404 Not Found", "text/plain",
                           "not found: the probe port serves /metrics, /healthz and gRPC health\n",
                           head_only));
    }
  }

  const ProbeListenerOptions options_;
  const int listen_fd_;
  const int wake_read_;
  const int wake_write_;
  std::thread loop_thread_;
  std::atomic<uint64_t> failed_{0};  // accepts short of descriptors or memory
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int answering_ ABSL_GUARDED_BY(mu_) = 0;  // requests being answered (threads running)
};

ProbeListener::ProbeListener(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

ProbeListener::~ProbeListener() { Stop(); }

void ProbeListener::Stop() { impl_->Stop(); }

uint64_t ProbeListener::failed() const { return impl_->failed(); }

absl::StatusOr<std::unique_ptr<ProbeListener>> ProbeListener::Start(ProbeListenerOptions options) {
  std::string address = absl::StrCat(options.address, ":", options.port);
  auto cannot = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on the probe address ", address, ": ", why,
                     "; choose another --probe-port or --probe-address"));
  };
  if (options.grpc_server == nullptr || !options.metrics || !options.serving) {
    return absl::InvalidArgumentError("ProbeListener needs a gRPC server, metrics and serving");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string port = std::to_string(options.port);
  if (int rc = getaddrinfo(options.address.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return cannot(gai_strerror(rc));
  }
  int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    int err = errno;
    freeaddrinfo(found);
    if (fd >= 0) close(fd);
    return cannot(err == EADDRINUSE ? "the port is in use" : strerror(err));
  }
  freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fd);
    return cannot(strerror(errno));
  }
  auto impl = std::make_unique<Impl>(std::move(options), fd, wake[0], wake[1]);
  return std::unique_ptr<ProbeListener>(new ProbeListener(std::move(impl), bound_port));
}

}  // namespace kcache
