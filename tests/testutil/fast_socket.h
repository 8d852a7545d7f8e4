// A raw client of kcached's fast-path socket for tests (docs/protocol.md, "The fast path"):
// connects, takes the hello and the arena's descriptor, sends and receives single packets. For
// the cases libkcache's FastPath never produces (garbage, leases left behind, the descriptor
// itself).
#ifndef KCACHE_TESTS_TESTUTIL_FAST_SOCKET_H_
#define KCACHE_TESTS_TESTUTIL_FAST_SOCKET_H_

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>

#include "kcache/v1/fast_path.pb.h"

namespace kcache::testing {

class FastSocket {
 public:
  FastSocket() = default;
  ~FastSocket() { Close(); }
  FastSocket(const FastSocket&) = delete;
  FastSocket& operator=(const FastSocket&) = delete;

  // Connects and reads the hello (true when one came; arena_fd() >= 0 when it carried one).
  bool Connect(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return false;
    int buffer = 4 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
    std::optional<std::string> hello = Receive(5000, &arena_fd_);
    return hello.has_value() && hello_.ParseFromString(*hello);
  }

  bool Send(const std::string& packet) {
    return send(fd_, packet.data(), packet.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(packet.size());
  }
  bool Send(const v1::FastRequest& request) { return Send(request.SerializeAsString()); }

  // One packet, or nullopt after `millis` or when the daemon closed the connection.
  std::optional<std::string> Receive(int millis = 5000, int* passed_fd = nullptr) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, millis) <= 0) return std::nullopt;
    std::string buffer(2 << 20, '\0');
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t got = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    if (got <= 0) return std::nullopt;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c != nullptr && c->cmsg_type == SCM_RIGHTS) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      if (passed_fd != nullptr) {
        *passed_fd = fd;
      } else {
        close(fd);
      }
    }
    buffer.resize(static_cast<size_t>(got));
    return buffer;
  }
  std::optional<v1::FastResponse> ReceiveResponse(int millis = 5000) {
    std::optional<std::string> packet = Receive(millis);
    v1::FastResponse response;
    if (!packet || !response.ParseFromString(*packet)) return std::nullopt;
    return response;
  }

  void Close() {
    if (fd_ >= 0) close(fd_);
    if (arena_fd_ >= 0) close(arena_fd_);
    fd_ = arena_fd_ = -1;
  }

  const v1::FastHello& hello() const { return hello_; }
  int arena_fd() const { return arena_fd_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int arena_fd_ = -1;
  v1::FastHello hello_;
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_FAST_SOCKET_H_
