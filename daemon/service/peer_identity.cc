#include "daemon/service/peer_identity.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kcache {
namespace {

Peer OfCredentials(const ucred& cred) {
  std::string account = absl::StrCat("uid ", cred.uid);
  std::string words = cred.pid > 0 ? absl::StrCat(account, " pid ", cred.pid) : account;
  return Peer{std::move(account), std::move(words)};
}

// "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7"; "ipv6:[fd00::7]:51234" -> "ipv6:[fd00::7]".
std::string WithoutPort(absl::string_view address) {
  size_t colon = address.rfind(':');
  size_t bracket = address.rfind(']');
  if (colon == absl::string_view::npos || (bracket != absl::string_view::npos && colon < bracket)) {
    return std::string(address);
  }
  return std::string(address.substr(0, colon));
}

}  // namespace

absl::StatusOr<ucred> PeerCredentials(int fd) {
  ucred cred{};
  socklen_t size = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) {
    return absl::InternalError(absl::StrCat("SO_PEERCRED: ", strerror(errno)));
  }
  return cred;
}

Peer PeerOfSocket(int fd) {
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 &&
      address.ss_family == AF_UNIX) {
    absl::StatusOr<ucred> cred = PeerCredentials(fd);
    if (cred.ok()) return OfCredentials(*cred);
  } else if (size = sizeof(address);
             getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 &&
             (address.ss_family == AF_INET || address.ss_family == AF_INET6)) {
    char host[INET6_ADDRSTRLEN] = {};
    const bool v4 = address.ss_family == AF_INET;
    const void* in =
        v4 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&address)->sin_addr)
           : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&address)->sin6_addr);
    uint16_t port = ntohs(v4 ? reinterpret_cast<sockaddr_in*>(&address)->sin_port
                             : reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    if (inet_ntop(address.ss_family, in, host, sizeof(host)) != nullptr) {
      std::string account = v4 ? absl::StrCat("ipv4:", host) : absl::StrCat("ipv6:[", host, "]");
      std::string words = absl::StrCat(account, ":", port);
      return Peer{std::move(account), std::move(words)};
    }
  }
  return Peer{"unknown peer", "unknown peer"};
}

void PeerDirectory::Accepted(int fd, const ucred& cred) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = cred;
}

Peer PeerDirectory::Who(absl::string_view grpc_peer) const {
  if (absl::ConsumePrefix(&grpc_peer, "fd:")) {
    int fd = -1;
    if (absl::SimpleAtoi(grpc_peer, &fd)) {
      absl::MutexLock lock(&mu_);
      if (auto it = by_fd_.find(fd); it != by_fd_.end()) return OfCredentials(it->second);
    }
    std::string unknown = absl::StrCat("connection fd:", grpc_peer, " (credentials unknown)");
    return Peer{unknown, unknown};
  }
  if (absl::StartsWith(grpc_peer, "ipv4:") || absl::StartsWith(grpc_peer, "ipv6:")) {
    return Peer{WithoutPort(grpc_peer), std::string(grpc_peer)};
  }
  if (absl::StartsWith(grpc_peer, "unix:")) {
    std::string unknown = "unix socket (credentials unknown)";
    return Peer{unknown, unknown};
  }
  return Peer{std::string(grpc_peer), std::string(grpc_peer)};
}

}  // namespace kcache
