#include "daemon/service/fast_path_server.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/bounded_lru.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/convert.h"
#include "daemon/service/epoll_threads.h"
#include "daemon/service/fast_arena.h"
#include "daemon/service/object_cache_service.h"
#include "daemon/service/request_limits.h"
#include "kcache/v1/fast_path.pb.h"
#include "kcache/v1/objects.pb.h"

namespace kcache {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr int kSocketBufferBytes = 2 * static_cast<int>(kMaxFastMessageBytes);

struct Lease {
  uint64_t slot = 0;
  uint64_t bytes = 0;
  uint64_t offset = 0;
};

// One client connection. Served by one thread at a time (EPOLLONESHOT); Stop touches it only
// after every thread has ended.
struct Connection {
  uint64_t id = 0;
  int fd = -1;
  std::deque<std::string> outbox;  // answers the socket had no room for, in order
  absl::flat_hash_map<uint64_t, Lease> leases;
  uint64_t next_lease = 1;
  uint64_t leased_bytes = 0;
  bool broken = false;  // a send failed: close at the end of the turn
};

absl::Status Errno(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void SetBuffers(int fd) {
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBufferBytes, sizeof(kSocketBufferBytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBufferBytes, sizeof(kSocketBufferBytes));
}

// Sends one packet, with the arena's descriptor when fd_to_pass >= 0. Non-blocking.
ssize_t SendPacket(int fd, const std::string& data, int fd_to_pass = -1) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
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
  return sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

class FastPathServerImpl final : public FastPathServer {
 public:
  FastPathServerImpl(ArtifactCache* cache, Statistics* stats, objects::ObjectCache* objects,
                     FastPathOptions options, std::unique_ptr<FastArena> arena)
      : cache_(cache),
        stats_(stats),
        objects_(objects),
        options_(std::move(options)),
        arena_(std::move(arena)) {}

  ~FastPathServerImpl() override { Stop(); }

  absl::Status Listen() {
    if (absl::Status s = workers_.Open(); !s.ok()) return s;
    listener_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener_ < 0) return Errno("socket(AF_UNIX, SOCK_SEQPACKET)");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options_.socket_path.size() >= sizeof(addr.sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat("--fast-socket ", options_.socket_path,
                                                     " is longer than ", sizeof(addr.sun_path) - 1,
                                                     " bytes"));
    }
    std::memcpy(addr.sun_path, options_.socket_path.data(), options_.socket_path.size());
    // Bound owner-only, then widened to the mode: never more open than asked, not even briefly.
    mode_t old_umask = umask(0177);
    int bound = bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    umask(old_umask);
    if (bound != 0) return Errno(absl::StrCat("binding the fast socket ", options_.socket_path));
    if (chmod(options_.socket_path.c_str(), options_.socket_mode) != 0) {
      return Errno(absl::StrCat("chmod ", options_.socket_path));
    }
    if (listen(listener_, 128) != 0) return Errno("listen on the fast socket");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = kListenerId;
    if (epoll_ctl(workers_.fd(), EPOLL_CTL_ADD, listener_, &ev) != 0) return Errno("epoll_ctl");
    workers_.Start(options_.threads, [this] { Loop(); });
    return absl::OkStatus();
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    workers_.Stop();
    std::vector<std::shared_ptr<Connection>> left;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, connection] : connections_) left.push_back(connection);
      connections_.clear();
    }
    for (auto& connection : left) CloseConnection(*connection, /*erase=*/false);
    if (listener_ >= 0) close(listener_);
    listener_ = -1;
  }

 private:
  void Loop() {
    std::string buffer(kMaxFastMessageBytes + 1, '\0');
    epoll_event events[16];
    while (!stopped_.load()) {
      int n = epoll_wait(workers_.fd(), events, 16, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        spdlog::error("fast path: epoll_wait failed: {}", std::strerror(errno));
        return;
      }
      for (int i = 0; i < n && !stopped_.load(); ++i) {
        uint64_t id = events[i].data.u64;
        if (id == EpollThreads::kWakeId) return;
        if (id == kListenerId) {
          Accept();
          continue;
        }
        std::shared_ptr<Connection> connection;
        {
          absl::MutexLock lock(&mu_);
          auto it = connections_.find(id);
          if (it != connections_.end()) connection = it->second;
        }
        if (connection != nullptr) Serve(*connection, events[i].events, buffer);
      }
    }
  }

  void Accept() {
    for (int i = 0; i < kFastBatch; ++i) {
      int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      SetBuffers(fd);
      v1::FastHello hello;
      hello.set_version(1);
      size_t open = 0;
      {
        absl::MutexLock lock(&mu_);
        open = connections_.size();
      }
      if (open >= static_cast<size_t>(options_.max_connections)) {
        hello.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
        hello.set_message(absl::StrCat("kcached serves at most ", options_.max_connections,
                                       " fast-path connections (--fast-max-connections); "
                                       "use gRPC"));
        SendPacket(fd, hello.SerializeAsString());
        close(fd);
        stats_->Add(Statistic::kFastConnectionsRefused);
        continue;
      }
      hello.set_arena_bytes(arena_->size());
      if (SendPacket(fd, hello.SerializeAsString(), arena_->fd()) < 0) {
        close(fd);
        continue;
      }
      auto connection = std::make_shared<Connection>();
      connection->fd = fd;
      {
        absl::MutexLock lock(&mu_);
        connection->id = next_id_++;
        connections_[connection->id] = connection;
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
      ev.data.u64 = connection->id;
      if (epoll_ctl(workers_.fd(), EPOLL_CTL_ADD, fd, &ev) != 0) CloseConnection(*connection, true);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = kListenerId;
    epoll_ctl(workers_.fd(), EPOLL_CTL_MOD, listener_, &ev);
  }

  // One turn on a connection: flush what waits, read and answer up to kFastBatch messages
  // (reading only when nothing was left to send), send the turn's answers together, then
  // re-arm. Answers go out in one sendmmsg, not one by one: each send wakes the client, and a
  // wake-up of another CPU costs a VM ~20 us, which a pipelined start pays per kernel.
  void Serve(Connection& c, uint32_t events, std::string& buffer) {
    // A hang-up still reads what the client sent before it (a launcher's note_uncached goes
    // out just before it execs the compiler and its socket closes): the read then ends at 0.
    bool closing = (events & EPOLLERR) != 0;
    Flush(c);
    bool backlog = !c.outbox.empty();  // the socket had no room: read more once it has
    for (int i = 0; i < kFastBatch && !closing && !c.broken && !backlog; ++i) {
      iovec iov{buffer.data(), buffer.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;  // no control buffer: descriptors a client sends are dropped
      ssize_t got = recvmsg(c.fd, &msg, MSG_DONTWAIT | MSG_TRUNC);
      if (got == 0) {
        closing = true;
        break;
      }
      if (got < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) closing = true;
        break;
      }
      if (static_cast<size_t>(got) > kMaxFastMessageBytes || (msg.msg_flags & MSG_TRUNC)) {
        BadMessage(c, 0,
                   absl::StrCat("a message of ", got, " bytes: at most ", kMaxFastMessageBytes,
                                " are accepted (a larger spec goes over gRPC)"));
        continue;
      }
      Handle(c, absl::string_view(buffer.data(), static_cast<size_t>(got)));
    }
    Flush(c);
    if (closing || c.broken) {
      CloseConnection(c, true);
      return;
    }
    epoll_event ev{};
    ev.events = (c.outbox.empty() ? EPOLLIN : EPOLLOUT) | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.u64 = c.id;
    if (epoll_ctl(workers_.fd(), EPOLL_CTL_MOD, c.fd, &ev) != 0) CloseConnection(c, true);
  }

  void Handle(Connection& c, absl::string_view packet) {
    v1::FastRequest request;
    if (!request.ParseFromArray(packet.data(), static_cast<int>(packet.size()))) {
      BadMessage(c, 0,
                 "the message does not parse as a kcache.v1.FastRequest "
                 "(proto/kcache/v1/fast_path.proto)");
      return;
    }
    switch (request.op_case()) {
      case v1::FastRequest::kReleaseLease:
        if (!ReleaseLease(c, request.release_lease())) {
          BadMessage(c, request.tag(),
                     absl::StrCat("no lease ", request.release_lease(), " on this connection"));
        }
        return;
      case v1::FastRequest::kResolve:
        Answer(c, Resolve(c, request.tag(), request.resolve()));
        return;
      case v1::FastRequest::kNoteUncached:
        if (request.note_uncached() == 0 || request.note_uncached() >= kUncachedReasonCount) {
          BadMessage(
              c, request.tag(),
              absl::StrCat("note_uncached ", request.note_uncached(), " is no reason: 1 to ",
                           kUncachedReasonCount - 1, " (UncachedReason, core/compiler_command.h)"));
          return;
        }
        stats_->Add(UncachedStatistic(static_cast<UncachedReason>(request.note_uncached())));
        stats_->uncached_options().Add(static_cast<UncachedReason>(request.note_uncached()),
                                       request.note_uncached_option());
        return;
      case v1::FastRequest::kListObjects:
      case v1::FastRequest::kGetObject:
        Answer(c, ObjectLookup(c, request));
        return;
      case v1::FastRequest::OP_NOT_SET:
        break;
    }
    BadMessage(c, request.tag(),
               "a FastRequest needs one of resolve, release_lease, list_objects, get_object or "
               "note_uncached");
  }

  // list_objects or get_object: the listing (a serialized ListObjectsResponse) or the bundle,
  // placed in the arena under a lease. Counted as objects.* like the gRPC calls: a listing a
  // lookup, a get an object served. kcache-launch hands a miss's listing on to kcache, which
  // does not list it again (client/launch/handed_miss.h): one launcher run, one lookup.
  v1::FastResponse ObjectLookup(Connection& c, const v1::FastRequest& request) {
    if (objects_ == nullptr) {
      return Refusal(request.tag(), absl::FailedPreconditionError(
                                        "this kcached serves no compiler objects on its fast "
                                        "path: use gRPC (kcache.v1.ObjectCache)"));
    }
    bool listing = request.has_list_objects();
    if (listing && request.list_objects().all()) {
      return Refusal(request.tag(),
                     absl::InvalidArgumentError("list_objects: listing every entry (all) is "
                                                "gRPC's ListObjects, not the fast path's"));
    }
    std::string name = listing ? absl::StrCat("objects-list/", request.list_objects().key1())
                               : absl::StrCat("object/", request.get_object().key1(), "/",
                                              request.get_object().entry_id());
    uint64_t generation = options_.objects_generation ? options_.objects_generation() : 0;
    absl::StatusOr<Answered> answered = Reanswer(c, name, generation);
    if (absl::IsNotFound(answered.status())) {
      answered = AnswerAfresh(c, request, name, generation);
    } else if (answered.ok() && !listing) {
      // Served from the arena, not the cache: the stores' LRU bound is told all the same.
      RecordObjectUse(*objects_, request.get_object());
    }
    if (!answered.ok()) return Refusal(request.tag(), answered.status());
    stats_->Add(listing ? Statistic::kObjectLookups : Statistic::kObjectsServed);
    v1::FastResponse response;
    response.set_tag(request.tag());
    response.mutable_header()->set_size(answered->size);
    response.mutable_header()->set_checksum(answered->checksum);
    response.set_offset(c.leases[answered->lease].offset);
    response.set_lease(answered->lease);
    return response;
  }

  // An object answer in the arena: its slot's key, size and checksum; and the lease taken on
  // it for this request.
  struct Answered {
    std::string slot_key;
    uint64_t size = 0;
    uint64_t checksum = 0;
    uint64_t lease = 0;
  };
  // The bytes of the records of answers remembered for Reanswer (their names and slot keys,
  // and what a record costs beyond them): about 4,000 records, least recently used dropped.
  static constexpr uint64_t kRememberedAnswerBytes = uint64_t{1} << 20;
  static constexpr uint64_t kRememberedAnswerOverhead = 128;

  // The answer under `name` given before in this generation, leased again from its slot.
  // NotFound when there is none, the generation moved on or its slot was evicted (answer it
  // afresh); the lease bound's refusal otherwise.
  absl::StatusOr<Answered> Reanswer(Connection& c, const std::string& name, uint64_t generation) {
    if (!options_.objects_generation) return absl::NotFoundError("answers are not reused");
    Answered answered;
    std::optional<RememberedAnswer> remembered = answers_.Find(name);
    if (!remembered.has_value() || remembered->generation != generation) {
      return absl::NotFoundError("not answered in this generation");
    }
    answered = remembered->answer;
    absl::StatusOr<uint64_t> lease =
        TakeLease(c, answered.size, [&] { return arena_->LeaseExisting(answered.slot_key); });
    if (!lease.ok()) return lease.status();
    answered.lease = *lease;
    stats_->Add(Statistic::kObjectMemoryHits);
    return answered;
  }

  // The listing or bundle `request` asks for, read from the object cache, placed in the arena
  // under `name` and its checksum, and leased; remembered under `generation` for Reanswer.
  absl::StatusOr<Answered> AnswerAfresh(Connection& c, const v1::FastRequest& request,
                                        const std::string& name, uint64_t generation) {
    bool listing = request.has_list_objects();
    std::string bytes;
    if (listing) {
      v1::ListObjectsResponse entries;
      absl::Status listed = ListObjectsByKey(*objects_, request.list_objects(), &entries);
      if (!listed.ok()) return listed;
      bytes = entries.SerializeAsString();
    } else {
      absl::StatusOr<std::string> bundle = GetObjectBytes(*objects_, request.get_object());
      if (!bundle.ok()) return bundle.status();
      bytes = *std::move(bundle);
    }
    Answered fresh;
    fresh.size = bytes.size();
    fresh.checksum = PayloadChecksum(bytes);
    // New bytes under the same name: another slot.
    fresh.slot_key = absl::StrCat(name, "/", fresh.checksum);
    absl::StatusOr<uint64_t> lease =
        TakeLease(c, bytes.size(), [&] { return arena_->PlaceBytes(fresh.slot_key, bytes); });
    if (!lease.ok()) return lease.status();
    fresh.lease = *lease;
    // An empty listing (no bytes: a ListObjectsResponse without entries) is asked again next
    // time, so that a new entry in a store or the fleet tier shows at once, as
    // objects::MemoObjectCache does.
    if (options_.objects_generation && !(listing && fresh.size == 0)) {
      Remember(name, fresh, generation);
    }
    return fresh;
  }

  void Remember(const std::string& name, const Answered& answer, uint64_t generation) {
    answers_.Insert(name, RememberedAnswer{answer, generation},
                    name.size() + answer.slot_key.size() + kRememberedAnswerOverhead);
  }

  // A new lease of this connection on the `size` bytes `place` puts in the arena (a
  // FastArena::Place, PlaceBytes or LeaseExisting), within the connection's lease bound. A refusal
  // (the bound, or no room in the arena) is counted as fast.fallback_* and says why.
  template <typename PlaceFn>
  absl::StatusOr<uint64_t> TakeLease(Connection& c, uint64_t size, PlaceFn place) {
    if (c.leased_bytes + size > options_.max_leased_bytes) {
      stats_->Add(Statistic::kFastFallbackLeaseBound);
      return absl::ResourceExhaustedError(absl::StrCat(
          "this connection holds ", c.leased_bytes, " bytes of leases; --fast-max-leased-bytes is ",
          options_.max_leased_bytes, ": release some, or use gRPC"));
    }
    absl::StatusOr<FastArena::Placed> placed = place();
    if (!placed.ok()) {
      if (absl::IsResourceExhausted(placed.status())) {
        stats_->Add(Statistic::kFastFallbackArenaFull);
      }
      return placed.status();
    }
    uint64_t lease = c.next_lease++;
    c.leases[lease] = Lease{placed->slot, size, placed->offset};
    c.leased_bytes += size;
    PublishGauges();
    return lease;
  }

  // A lookup that never compiles (ArtifactCache::Peek), counted only when answered here: a
  // miss, PTX that gRPC may compile, or an answer past this path's bounds goes to gRPC, which
  // counts it (this path counts only fast.fallback_*).
  v1::FastResponse Resolve(Connection& c, uint64_t tag, const v1::ResolveRequest& request) {
    v1::FastResponse response;
    response.set_tag(tag);
    absl::Time arrived = absl::Now();
    absl::StatusOr<ResolveQuery> query = CheckedQueryFromProto(request);
    if (!query.ok()) {
      stats_->RecordInvalidRequest(absl::Now() - arrived);
      return Refusal(tag, query.status());
    }
    bool ptx_now = query->ptx_now;
    ArtifactCache::Peeked peeked = cache_->Peek(*std::move(query));
    if (!peeked.served.ok()) {
      if (absl::IsInvalidArgument(peeked.served.status())) {  // final: the client asks no more
        cache_->CommitPeek(peeked);
        return Refusal(tag, peeked.served.status());
      }
      if (!absl::IsNotFound(peeked.served.status())) {  // every tier failing, ...: as it is
        return Refusal(tag, peeked.served.status());
      }
      stats_->Add(Statistic::kFastFallbackMiss);
      return Refusal(tag, absl::NotFoundError("not served on the fast path: ask over gRPC"));
    }
    const Served& served = *peeked.served;
    if (served.artifact == nullptr) {
      return Refusal(tag, absl::InternalError("the cache served no artifact"));
    }
    if (served.rule == ServeRule::kPtxJit && !ptx_now) {  // gRPC may compile the SASS
      stats_->Add(Statistic::kFastFallbackMiss);
      return Refusal(tag, absl::NotFoundError("not served on the fast path: ask over gRPC"));
    }
    absl::StatusOr<uint64_t> lease =
        TakeLease(c, served.artifact->bytes.size(), [&] { return arena_->Place(served.artifact); });
    if (!lease.ok()) return Refusal(tag, lease.status());
    HeaderFromServed(served, response.mutable_header());
    response.set_offset(c.leases[*lease].offset);
    response.set_lease(*lease);
    if (response.ByteSizeLong() > kMaxFastMessageBytes) {
      ReleaseLease(c, *lease);
      return Refusal(tag, absl::ResourceExhaustedError(
                              "the answer's header (its compile log) is too large for the fast "
                              "path: use gRPC"));
    }
    cache_->CommitPeek(peeked);
    stats_->Add(Statistic::kFastHits);
    return response;
  }

  static v1::FastResponse Refusal(uint64_t tag, const absl::Status& status) {
    v1::FastResponse response;
    response.set_tag(tag);
    response.set_code(static_cast<int>(status.code()));
    response.set_message(std::string(status.message().substr(0, 4096)));
    return response;
  }

  void BadMessage(Connection& c, uint64_t tag, absl::string_view what) {
    stats_->Add(Statistic::kFastBadMessages);
    Answer(c, Refusal(tag, absl::InvalidArgumentError(what)));
  }

  bool ReleaseLease(Connection& c, uint64_t lease) {
    auto it = c.leases.find(lease);
    if (it == c.leases.end()) return false;
    arena_->Release(it->second.slot);
    c.leased_bytes -= it->second.bytes;
    c.leases.erase(it);
    PublishGauges();
    return true;
  }

  // Queued; sent by the turn's Flush.
  void Answer(Connection& c, const v1::FastResponse& response) {
    c.outbox.push_back(response.SerializeAsString());
  }

  // Sends the outbox in order, as many packets a system call as it holds (up to kFastBatch).
  void Flush(Connection& c) {
    while (!c.outbox.empty() && !c.broken) {
      size_t n = std::min(c.outbox.size(), static_cast<size_t>(kFastBatch));
      std::vector<iovec> iovs(n);
      std::vector<mmsghdr> messages(n);
      for (size_t i = 0; i < n; ++i) {
        iovs[i] = iovec{c.outbox[i].data(), c.outbox[i].size()};
        messages[i] = mmsghdr{};
        messages[i].msg_hdr.msg_iov = &iovs[i];
        messages[i].msg_hdr.msg_iovlen = 1;
      }
      int sent =
          sendmmsg(c.fd, messages.data(), static_cast<unsigned>(n), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent > 0) {
        c.outbox.erase(c.outbox.begin(), c.outbox.begin() + sent);
        continue;
      }
      if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT resumes
      if (sent < 0 && errno == EINTR) continue;
      c.broken = true;
    }
  }

  void CloseConnection(Connection& c, bool erase) {
    if (c.fd < 0) return;
    epoll_ctl(workers_.fd(), EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.fd = -1;
    for (auto& [lease, held] : c.leases) arena_->Release(held.slot);
    c.leases.clear();
    c.leased_bytes = 0;
    c.outbox.clear();
    PublishGauges();
    if (erase) {
      absl::MutexLock lock(&mu_);
      connections_.erase(c.id);
    }
  }

  void Preload(const std::shared_ptr<const Artifact>& artifact) override {
    if (arena_->Preload(artifact)) PublishGauges();
  }

  // fast.leases_held and fast.arena_bytes follow the arena (the statistics only add).
  void PublishGauges() {
    absl::MutexLock lock(&gauge_mu_);
    uint64_t leases = arena_->leases();
    uint64_t bytes = arena_->bytes_in_use();
    stats_->Move(Statistic::kFastLeasesHeld,
                 static_cast<int64_t>(leases) - static_cast<int64_t>(leases_shown_));
    stats_->Move(Statistic::kFastArenaBytes,
                 static_cast<int64_t>(bytes) - static_cast<int64_t>(bytes_shown_));
    leases_shown_ = leases;
    bytes_shown_ = bytes;
  }

  ArtifactCache* const cache_;
  Statistics* const stats_;
  objects::ObjectCache* const objects_;
  const FastPathOptions options_;
  const std::unique_ptr<FastArena> arena_;
  EpollThreads workers_;
  int listener_ = -1;
  std::atomic<bool> stopped_{false};
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 2;  // 0 and 1 name the listener and the wake fd
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  struct RememberedAnswer {
    Answered answer;
    uint64_t generation = 0;
  };
  BoundedLru<std::string, RememberedAnswer> answers_{kRememberedAnswerBytes};
  absl::Mutex gauge_mu_;
  uint64_t leases_shown_ ABSL_GUARDED_BY(gauge_mu_) = 0;
  uint64_t bytes_shown_ ABSL_GUARDED_BY(gauge_mu_) = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FastPathServer>> FastPathServer::Start(
    ArtifactCache* cache, Statistics* stats, FastPathOptions options,
    objects::ObjectCache* objects) {
  absl::StatusOr<std::unique_ptr<FastArena>> arena = FastArena::Create(options.arena_bytes);
  if (!arena.ok()) return arena.status();
  auto server = std::make_unique<FastPathServerImpl>(cache, stats, objects, std::move(options),
                                                     *std::move(arena));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return std::unique_ptr<FastPathServer>(std::move(server));
}

}  // namespace kcache
