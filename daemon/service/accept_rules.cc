#include "daemon/service/accept_rules.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kcache {
namespace {

// Whether `count` descriptors are free: each probe takes the lowest free number, so `count`
// probes succeed exactly when that many are free.
bool HasFreeDescriptors(int any_fd, int count) {
  int probes[kDescriptorHeadroom + 1];
  int made = 0;
  while (made < count) {
    int fd = fcntl(any_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) break;
    probes[made++] = fd;
  }
  int error = errno;
  for (int i = 0; i < made; ++i) close(probes[i]);
  errno = error;
  return made == count;
}

}  // namespace

int AcceptKeepingHeadroom(int listen_fd) {
  // The connection's own descriptor, and the headroom after it.
  if (!HasFreeDescriptors(listen_fd, kDescriptorHeadroom + 1)) {
    if (errno != ENOMEM) errno = EMFILE;
    return -1;
  }
  return accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

bool AcceptLackedResources(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

}  // namespace kcache
