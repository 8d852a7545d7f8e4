// Serving threads over one epoll set, woken together to stop.
#include "daemon/service/epoll_threads.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kcache {

EpollThreads::~EpollThreads() {
  Stop();
  for (int fd : {wake_, epoll_}) {
    if (fd >= 0) close(fd);
  }
}

absl::Status EpollThreads::Open() {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  if (epoll_ < 0 || wake_ < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoll set for the serving threads: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

void EpollThreads::Start(int count, const std::function<void()>& loop) {
  for (int i = 0; i < std::max(count, 1); ++i) threads_.emplace_back(loop);
}

void EpollThreads::Stop() {
  if (wake_ >= 0 && !threads_.empty()) {
    uint64_t one = 1;
    (void)!write(wake_, &one, sizeof(one));
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace kcache
