#include "daemon/host/unix_grpc_listener.h"

#include <errno.h>
#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/service/accept_rules.h"

namespace kcache {
namespace {

// The kernel's backlog: connections a burst of starting workers leaves waiting for accept.
constexpr int kBacklog = 1024;

absl::Status BindError(const std::string& path, absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot listen on unix socket ", path, ": ", what, ": ", strerror(errno),
                   " (check the folder's permissions, or that the path is free)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<UnixGrpcListener>> UnixGrpcListener::Start(const std::string& path,
                                                                          grpc::Server* server,
                                                                          PeerDirectory* peers) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path ", path, " is ", path.size(),
                                                   " bytes; the limit is ",
                                                   sizeof(address.sun_path) - 1));
  }
  memcpy(address.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return BindError(path, "socket");
  // Linux makes the socket file with the socket inode's mode less the umask: owner-only from
  // the first instant, without touching the process's umask (other threads create files).
  if (fchmod(fd, 0600) != 0 ||
      bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    absl::Status error = BindError(path, "bind");
    close(fd);
    return error;
  }
  if (listen(fd, kBacklog) != 0) {
    absl::Status error = BindError(path, "listen");
    close(fd);
    unlink(path.c_str());
    return error;
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    absl::Status error = BindError(path, "eventfd");
    close(fd);
    unlink(path.c_str());
    return error;
  }
  return std::unique_ptr<UnixGrpcListener>(new UnixGrpcListener(fd, wake, server, peers));
}

UnixGrpcListener::UnixGrpcListener(int listen_fd, int wake_fd, grpc::Server* server,
                                   PeerDirectory* peers)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), server_(server), peers_(peers) {
  thread_ = std::thread([this] { AcceptLoop(); });
}

UnixGrpcListener::~UnixGrpcListener() { Stop(); }

void UnixGrpcListener::Stop() {
  if (stopped_.exchange(true)) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void UnixGrpcListener::AcceptLoop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      spdlog::error("the main socket's accept loop stopped: poll: {}", strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // Stop
    if (fds[0].revents == 0) continue;
    while (true) {
      int fd = AcceptKeepingHeadroom(listen_fd_);
      if (fd < 0) {
        if (AcceptLackedResources(errno)) {
          // The connection stays in the backlog; resting keeps a full descriptor table (which
          // wakes poll at once, again and again) from spinning a core.
          if (failed_.fetch_add(1) % 1000 == 0) {
            spdlog::warn(
                "cannot accept a connection on the main socket: {} (kcached keeps {} "
                "descriptors free for itself; raise the descriptor limit, or fewer clients)",
                strerror(errno), kDescriptorHeadroom);
          }
          absl::SleepFor(kAcceptPause);
        }
        break;  // EAGAIN: none left; ECONNABORTED and the like: the peer gave up
      }
      absl::StatusOr<ucred> cred = PeerCredentials(fd);
      if (!cred.ok()) {
        close(fd);
        continue;
      }
      peers_->Accepted(fd, *cred);
      accepted_.fetch_add(1);
      grpc::AddInsecureChannelFromFd(server_, fd);  // takes the descriptor
    }
  }
}

}  // namespace kcache
