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

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "daemon/host/metrics.h"

namespace kcache {
namespace {

constexpr absl::string_view kHttp2Preface = "PRI ";  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
constexpr size_t kMaxRequestHead = 16 << 10;

void SetReceiveTimeout(int fd, absl::Duration timeout) {
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
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

// Peeks at the connection's first bytes without taking them off the socket (gRPC must still
// read the whole preface). Empty when the peer sent nothing before the receive timeout.
std::string PeekStart(int fd, absl::Duration timeout) {
  char buf[4];
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_WAITALL);
    if (n == static_cast<ssize_t>(sizeof(buf))) return std::string(buf, sizeof(buf));
    if (n == 0) return "";                             // closed
    if (n < 0 && errno != EINTR) return "";            // timeout or error
    if (n > 0) absl::SleepFor(absl::Milliseconds(1));  // a partial peek: wait for more
  }
  return "";
}

// Reads up to the end of the request head ("\r\n\r\n"); empty on timeout, close or overflow.
std::string ReadHead(int fd) {
  std::string head;
  char buf[2048];
  while (head.size() < kMaxRequestHead) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    head.append(buf, static_cast<size_t>(n));
    if (absl::StrContains(head, "\r\n\r\n")) return head;
  }
  return "";
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
  // Owns the descriptors: the bound listening socket and both ends of the pipe Stop writes
  // to and AcceptLoop polls.
  Impl(ProbeListenerOptions options, int listen_fd, int wake_read, int wake_write)
      : options_(std::move(options)),
        listen_fd_(listen_fd),
        wake_read_(wake_read),
        wake_write_(wake_write) {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~Impl() { Stop(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    char byte = 1;
    [[maybe_unused]] ssize_t n = write(wake_write_, &byte, 1);
    accept_thread_.join();
    close(listen_fd_);
    close(wake_read_);
    close(wake_write_);
    absl::MutexLock lock(&mu_);
    // Wake the connections still waiting for a request: their reads end at once.
    for (int fd : open_) shutdown(fd, SHUT_RDWR);
    mu_.Await(absl::Condition(
        +[](int* active) { return *active == 0; }, &active_));
  }

 private:
  void AcceptLoop() {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    while (true) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;  // Stop
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;  // the peer gave up, or out of descriptors for a moment
      {
        absl::MutexLock lock(&mu_);
        if (stopping_ || active_ >= options_.max_http_connections) {
          close(fd);
          continue;
        }
        ++active_;
        open_.insert(fd);
      }
      std::thread([this, fd] {
        Handle(fd);
        absl::MutexLock lock(&mu_);
        --active_;
      }).detach();
    }
  }

  void Handle(int fd) {
    SetReceiveTimeout(fd, options_.read_timeout);
    std::string start = PeekStart(fd, options_.read_timeout);
    if (absl::StartsWith(start, kHttp2Preface)) {
      HandOverToGrpc(fd);
      return;
    }
    if (!start.empty()) AnswerHttp(fd);
    Forget(fd);
    close(fd);
  }

  // The descriptor is no longer this listener's to wake (it is being closed or handed over).
  void Forget(int fd) {
    absl::MutexLock lock(&mu_);
    open_.erase(fd);
  }

  void HandOverToGrpc(int fd) {
    bool stopping;
    {
      absl::MutexLock lock(&mu_);
      open_.erase(fd);
      stopping = stopping_;
    }
    if (stopping) {  // the gRPC server is about to shut down
      close(fd);
      return;
    }
    SetReceiveTimeout(fd, absl::ZeroDuration());
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    grpc::AddInsecureChannelFromFd(options_.grpc_server, fd);  // takes the descriptor
  }

  void AnswerHttp(int fd) {
    std::string head = ReadHead(fd);
    if (head.empty()) return;
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
  std::thread accept_thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int active_ ABSL_GUARDED_BY(mu_) = 0;  // connections being answered (threads running)
  absl::flat_hash_set<int> open_ ABSL_GUARDED_BY(mu_);  // their descriptors, until closed
};

ProbeListener::ProbeListener(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

ProbeListener::~ProbeListener() { Stop(); }

void ProbeListener::Stop() { impl_->Stop(); }

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
  if (fd < 0 || bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 128) != 0) {
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
