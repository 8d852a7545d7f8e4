#include "client/lib/fast_path.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/lib/clock.h"
#include "client/lib/wire.h"
#include "core/artifact.h"
#include "core/protocol.h"
#include "kcache/v1/fast_path.pb.h"

namespace kcache::client {

constexpr size_t kWindow = 32;
constexpr int kSocketBufferBytes = 2 * static_cast<int>(kMaxFastMessageBytes);
constexpr absl::Duration kReconnectPause = absl::Seconds(1);

struct FastPath::Connection {
  ~Connection() {
    if (base != nullptr) munmap(const_cast<char*>(base), size);
    if (fd >= 0) close(fd);
  }

  // Gives a lease back; from any thread (a SEQPACKET send is one atomic packet).
  void Release(uint64_t lease) {
    if (dead.load() || getpid() != pid) return;
    v1::FastRequest request;
    request.set_release_lease(lease);
    std::string packet = request.SerializeAsString();
    if (send(fd, packet.data(), packet.size(), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      std::lock_guard<std::mutex> lock(release_mu);
      unsent_releases.push_back(lease);  // sent with the next exchange
    }
  }

  int fd = -1;
  pid_t pid = 0;
  const char* base = nullptr;
  uint64_t size = 0;
  std::atomic<bool> dead{false};
  std::mutex release_mu;
  std::vector<uint64_t> unsent_releases;  // guarded by release_mu
};

namespace {

// What a FetchedKernel's view_owner holds: the lease (given back when the last copy goes) and,
// through the connection, the mapping the view points into.
struct LeaseHandle {
  LeaseHandle(std::shared_ptr<FastPath::Connection> c, uint64_t l)
      : connection(std::move(c)), lease(l) {}
  ~LeaseHandle() { connection->Release(lease); }
  std::shared_ptr<FastPath::Connection> connection;
  uint64_t lease;
};

bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    absl::Duration left = deadline - Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, events, 0};
    int timeout = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000));
    int n = poll(&p, 1, timeout);
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

// All of `packets`, in order, in as few system calls as the socket's room allows (sendmmsg):
// the daemon is woken once for a batch, not once a packet; a wake-up of the other CPU costs
// the sender ~20 us in a VM, most of a 12-kernel start's sending when made a packet at a time.
bool SendPackets(int fd, const std::vector<std::string>& packets, absl::Time deadline) {
  size_t sent = 0;
  while (sent < packets.size()) {
    size_t n = std::min(packets.size() - sent, kWindow);
    iovec iovs[kWindow];
    mmsghdr messages[kWindow];
    for (size_t i = 0; i < n; ++i) {
      const std::string& packet = packets[sent + i];
      iovs[i] = iovec{const_cast<char*>(packet.data()), packet.size()};
      messages[i] = mmsghdr{};
      messages[i].msg_hdr.msg_iov = &iovs[i];
      messages[i].msg_hdr.msg_iovlen = 1;
    }
    int got = sendmmsg(fd, messages, static_cast<unsigned>(n), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (got > 0) {
      sent += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (!WaitFor(fd, POLLOUT, deadline)) return false;
  }
  return true;
}

// One packet into `buffer`; the SCM_RIGHTS descriptor, when one came, into *passed_fd.
ssize_t ReceivePacket(int fd, char* buffer, size_t size, absl::Time deadline, int* passed_fd) {
  // A memory hit is answered in a few microseconds: a lone waiter looks for it briefly before
  // sleeping in poll (a sleep and a wake-up cost more than the answer). With other threads of
  // this process waiting too, spinning would only take their CPU (and the daemon's).
  static std::atomic<int> waiting{0};
  bool ready = false;
  if (waiting.fetch_add(1) == 0) {
    for (int i = 0; i < 64 && !ready; ++i) {
      pollfd p{fd, POLLIN, 0};
      ready = poll(&p, 1, 0) > 0;
    }
  }
  ready = ready || WaitFor(fd, POLLIN, deadline);
  waiting.fetch_sub(1);
  if (!ready) return -1;
  while (true) {
    iovec iov{buffer, size};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t got = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got >= 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int received;
          std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          if (passed_fd != nullptr && *passed_fd < 0) {
            *passed_fd = received;
          } else {
            close(received);
          }
        }
      }
      if (got == 0) return -1;  // the daemon closed the connection
      return got;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (!WaitFor(fd, POLLIN, deadline)) return -1;
  }
}

}  // namespace

std::string FastSocketFor(const std::string& address) {
  std::string path;
  if (absl::StartsWith(address, "unix://")) {
    path = address.substr(7);
  } else if (absl::StartsWith(address, "unix:")) {
    path = address.substr(5);
  } else if (absl::StartsWith(address, "/")) {
    path = address;
  }
  return path.empty() ? "" : path + ".fast";
}

FastPath::FastPath(std::string socket_path) : socket_path_(std::move(socket_path)) {}

FastPath::~FastPath() = default;

std::shared_ptr<FastPath::Connection> FastPath::Dial() const {
  auto c = std::make_shared<Connection>();
  c->pid = getpid();
  c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (c->fd < 0 || socket_path_.size() >= sizeof(addr.sun_path)) return nullptr;
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (connect(c->fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return nullptr;
  setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &kSocketBufferBytes, sizeof(kSocketBufferBytes));
  setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &kSocketBufferBytes, sizeof(kSocketBufferBytes));
  return c;
}

bool FastPath::Handshake(Connection& c, absl::Time deadline) const {
  char buffer[4096];
  int arena = -1;
  ssize_t got = ReceivePacket(c.fd, buffer, sizeof(buffer),
                              std::min(deadline, Now() + absl::Seconds(1)), &arena);
  v1::FastHello hello;
  bool ok = got > 0 && hello.ParseFromArray(buffer, static_cast<int>(got)) && hello.code() == 0 &&
            arena >= 0 && hello.arena_bytes() > 0;
  struct stat st {};
  ok = ok && fstat(arena, &st) == 0 && static_cast<uint64_t>(st.st_size) >= hello.arena_bytes();
  if (ok) {
    void* base = mmap(nullptr, hello.arena_bytes(), PROT_READ, MAP_SHARED, arena, 0);
    if (base != MAP_FAILED) {
      c.base = static_cast<const char*>(base);
      c.size = hello.arena_bytes();
    }
  }
  if (arena >= 0) close(arena);  // the mapping stays
  return c.base != nullptr;
}

void FastPath::Begin() {
  std::lock_guard<std::mutex> lock(mu_);
  if (connection_ == nullptr && !socket_path_.empty() && Now() >= retry_after_) {
    connection_ = Dial();  // null when kcached is not there yet: the first call dials again
  }
}

std::shared_ptr<FastPath::Connection> FastPath::Connected(absl::Time deadline) {
  if (connection_ != nullptr && !connection_->dead.load() && connection_->pid == getpid()) {
    if (connection_->base != nullptr) return connection_;
    if (Handshake(*connection_, deadline)) return connection_;  // dialed by Begin
    retry_after_ = Now() + kReconnectPause;
    connection_.reset();
    return nullptr;
  }
  connection_.reset();
  if (socket_path_.empty() || Now() < retry_after_) return nullptr;
  retry_after_ = Now() + kReconnectPause;  // until this attempt succeeds
  std::shared_ptr<Connection> c = Dial();
  if (c == nullptr || !Handshake(*c, deadline)) return nullptr;
  retry_after_ = absl::InfinitePast();
  connection_ = c;
  return c;
}

namespace {

// Maps the pages under `view` in one call before the checksum reads them (one fault per
// 4 KiB page otherwise). Only a hint: kernels before 5.14 lack it.
void PopulateReadable(absl::string_view view) {
#ifdef MADV_POPULATE_READ
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(view.data()) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(view.data()) + view.size();
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)view;
#endif
}

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// FastRequest{tag, resolve = request}, framed here so the request is serialized once, uncopied.
std::string ResolvePacket(uint64_t tag, const v1::ResolveRequest& request) {
  std::string packet;
  packet.push_back(static_cast<char>((v1::FastRequest::kTagFieldNumber << 3) | 0));
  AppendVarint(tag, &packet);
  packet.push_back(static_cast<char>((v1::FastRequest::kResolveFieldNumber << 3) | 2));
  AppendVarint(request.ByteSizeLong(), &packet);
  request.AppendToString(&packet);
  return packet;
}

}  // namespace

FastPath::Answer FastPath::Resolve(const v1::ResolveRequest& request, absl::Time deadline) {
  const v1::ResolveRequest* one = &request;
  return std::move(ResolveAll(&one, 1, deadline).front());
}

std::vector<FastPath::Answer> FastPath::ResolveMany(const std::vector<v1::ResolveRequest>& requests,
                                                    absl::Time deadline) {
  std::vector<const v1::ResolveRequest*> pointers;
  pointers.reserve(requests.size());
  for (const v1::ResolveRequest& r : requests) pointers.push_back(&r);
  return ResolveAll(pointers.data(), pointers.size(), deadline);
}

std::vector<FastPath::Answer> FastPath::ResolveAll(const v1::ResolveRequest* const* requests,
                                                   size_t count, absl::Time deadline) {
  std::vector<Viewed> viewed = Exchange(
      count, [&](size_t i, uint64_t tag) { return ResolvePacket(tag, *requests[i]); }, deadline);
  std::vector<Answer> answers(count);
  for (size_t i = 0; i < count; ++i) {
    if (!viewed[i].has_value()) continue;
    if (!viewed[i]->ok()) {
      answers[i] = viewed[i]->status();
      continue;
    }
    FetchedKernel kernel = FromWireHeader((*viewed[i])->header);
    kernel.view = (*viewed[i])->view;
    kernel.view_owner = std::move((*viewed[i])->owner);
    answers[i] = std::move(kernel);
  }
  return answers;
}

FastPath::Viewed FastPath::Ask(v1::FastRequest request, absl::Time deadline) {
  std::vector<Viewed> viewed = Exchange(
      1,
      [&](size_t, uint64_t tag) {
        request.set_tag(tag);
        return request.SerializeAsString();
      },
      deadline);
  return std::move(viewed.front());
}

bool FastPath::Tell(const v1::FastRequest& request, absl::Time deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Connection> c = Connected(deadline);
  if (c == nullptr) return false;
  if (SendPackets(c->fd, {request.SerializeAsString()}, deadline)) return true;
  c->dead = true;
  return false;
}

std::vector<FastPath::Viewed> FastPath::Exchange(
    size_t count, const std::function<std::string(size_t, uint64_t)>& packet_of,
    absl::Time deadline) {
  std::vector<Viewed> answers(count);
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Connection> c = Connected(deadline);
  if (c == nullptr) {
    fallbacks_ += count;
    return answers;
  }
  std::vector<uint64_t> releases;
  {
    std::lock_guard<std::mutex> release_lock(c->release_mu);
    releases.swap(c->unsent_releases);
  }
  for (uint64_t lease : releases) c->Release(lease);
  // Allocated once and never cleared: a fresh or zero-filled 1 MiB costs a page fault per
  // 4 KiB, while an answer writes only its own few hundred bytes.
  if (buffer_ == nullptr) buffer_.reset(new char[kMaxFastMessageBytes + 1]);
  for (size_t start = 0; start < count && !c->dead.load() && Now() < deadline; start += kWindow) {
    ExchangeWindow(c, start, std::min(count, start + kWindow), packet_of, deadline, answers);
  }
  for (const Viewed& a : answers) {
    if (a.has_value() && a->ok()) {
      served_++;
    } else if (!a.has_value() || a->status().code() == absl::StatusCode::kDataLoss) {
      fallbacks_++;
    }
  }
  return answers;
}

void FastPath::ExchangeWindow(const std::shared_ptr<Connection>& c, size_t start, size_t end,
                              const std::function<std::string(size_t, uint64_t)>& packet_of,
                              absl::Time deadline, std::vector<Viewed>& answers) {
  absl::flat_hash_map<uint64_t, size_t> waiting;  // tag -> index
  std::vector<std::string> packets;
  for (size_t i = start; i < end; ++i) {
    uint64_t tag = next_tag_++;
    std::string packet = packet_of(i, tag);
    if (packet.size() > kMaxFastMessageBytes) continue;  // a big request: gRPC
    packets.push_back(std::move(packet));
    waiting[tag] = i;
  }
  if (!SendPackets(c->fd, packets, deadline)) c->dead = true;
  while (!waiting.empty() && !c->dead.load()) {
    ssize_t got = ReceivePacket(c->fd, buffer_.get(), kMaxFastMessageBytes + 1, deadline, nullptr);
    if (got < 0) {
      // A deadline leaves the connection usable (late answers are recognized by their tags
      // and their leases given back); anything else ends it.
      if (Now() < deadline) c->dead = true;
      return;
    }
    v1::FastResponse response;
    if (!response.ParseFromArray(buffer_.get(), static_cast<int>(got))) {
      c->dead = true;
      return;
    }
    auto it = waiting.find(response.tag());
    if (it == waiting.end()) {  // the answer to a request given up on earlier
      if (response.code() == 0 && response.lease() != 0) c->Release(response.lease());
      continue;
    }
    answers[it->second] = Accept(c, response);
    waiting.erase(it);
  }
}

FastPath::Viewed FastPath::Accept(const std::shared_ptr<Connection>& c,
                                  v1::FastResponse& response) {
  if (response.code() == static_cast<int>(absl::StatusCode::kInvalidArgument)) {
    return absl::InvalidArgumentError(response.message());
  }
  if (response.code() != 0) return std::nullopt;
  auto lease = std::make_shared<LeaseHandle>(c, response.lease());
  const v1::ArtifactHeader& header = response.header();
  if (response.offset() > c->size || header.size() >= c->size - response.offset()) {
    checksum_failures_++;
    return absl::DataLossError(
        absl::StrCat("kcached's fast path answered a slot outside its arena (offset ",
                     response.offset(), ", ", header.size(), " bytes)"));
  }
  absl::string_view view(c->base + response.offset(), header.size());
  PopulateReadable(view);
  uint64_t checksum = PayloadChecksum(view);
  if (checksum != header.checksum()) {
    checksum_failures_++;
    return absl::DataLossError(
        absl::StrCat("XXH3-64 checksum ", absl::Hex(checksum, absl::kZeroPad16), " of the ",
                     view.size(), " bytes in kcached's arena does not match ",
                     absl::Hex(header.checksum(), absl::kZeroPad16), " in its answer; not used"));
  }
  // The answer's own header, moved: nothing reads `response` after this.
  return View{std::move(*response.mutable_header()), view,
              std::shared_ptr<const void>(lease, lease.get())};
}

}  // namespace kcache::client
