// The fast path's protocol over ConnectionServer: the greeting, the requests read and answered.
#include "daemon/service/fast_path_server.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/service/connection_server.h"
#include "daemon/service/fast_arena.h"
#include "daemon/service/fast_kernel_answers.h"
#include "daemon/service/fast_leases.h"
#include "daemon/service/fast_object_answers.h"
#include "kcache/v1/fast_path.pb.h"

namespace kcache {
namespace {

constexpr int kSocketBufferBytes = 2 * static_cast<int>(kMaxFastMessageBytes);

v1::FastResponse Refusal(uint64_t tag, const absl::Status& status) {
  v1::FastResponse response;
  response.set_tag(tag);
  response.set_code(static_cast<int>(status.code()));
  response.set_message(std::string(status.message().substr(0, 4096)));
  return response;
}

// What every connection shares.
struct FastPathShared {
  FastPathShared(ArtifactCache* cache, Statistics* stats_in, objects::ObjectCache* objects,
                 FastPathOptions options_in, std::unique_ptr<FastArena> arena_in)
      : stats(stats_in),
        options(std::move(options_in)),
        arena(std::move(arena_in)),
        gauges(arena.get(), stats_in),
        kernel_answers(cache, stats_in, arena.get()),
        object_answers(objects, stats_in, arena.get(), options.objects_generation) {}

  Statistics* const stats;
  const FastPathOptions options;
  const std::unique_ptr<FastArena> arena;
  FastArenaGauges gauges;
  const FastKernelAnswers kernel_answers;
  FastObjectAnswers object_answers;
};

// One client connection: each message a FastRequest, each answered (but release_lease and
// note_uncached) with a FastResponse, in order; its leases go when it closes.
class FastPathConnection final : public ConnectionHandler {
 public:
  explicit FastPathConnection(FastPathShared* shared)
      : shared_(*shared),
        leases_(shared->arena.get(), &shared->gauges, shared->stats,
                shared->options.max_leased_bytes) {}

  void OnInput(Connection& c, absl::string_view packet) override {
    v1::FastRequest request;
    if (!request.ParseFromArray(packet.data(), static_cast<int>(packet.size()))) {
      BadMessage(c, 0,
                 "the message does not parse as a kcache.v1.FastRequest "
                 "(proto/kcache/v1/fast_path.proto)");
      return;
    }
    switch (request.op_case()) {
      case v1::FastRequest::kReleaseLease:
        if (!leases_.Release(request.release_lease())) {
          BadMessage(c, request.tag(),
                     absl::StrCat("no lease ", request.release_lease(), " on this connection"));
        }
        return;
      case v1::FastRequest::kResolve:
        Answer(c, request.tag(),
               shared_.kernel_answers.Resolve(leases_, request.tag(), request.resolve()));
        return;
      case v1::FastRequest::kNoteUncached:
        if (absl::Status noted = shared_.object_answers.NoteUncached(request); !noted.ok()) {
          BadMessage(c, request.tag(), noted.message());
        }
        return;
      case v1::FastRequest::kNoteCudaStandIn:
        if (absl::Status noted = shared_.object_answers.NoteCudaStandIn(request); !noted.ok()) {
          BadMessage(c, request.tag(), noted.message());
        }
        return;
      case v1::FastRequest::kListObjects:
      case v1::FastRequest::kGetObject:
        Answer(c, request.tag(), shared_.object_answers.Lookup(leases_, request));
        return;
      case v1::FastRequest::OP_NOT_SET:
        break;
    }
    BadMessage(c, request.tag(),
               "a FastRequest needs one of resolve, release_lease, list_objects, get_object, "
               "note_uncached or note_cuda_stand_in");
  }

  void OnOversized(Connection& c, size_t bytes) override {
    BadMessage(c, 0,
               absl::StrCat("a message of ", bytes, " bytes: at most ", kMaxFastMessageBytes,
                            " are accepted (a larger spec goes over gRPC)"));
  }

 private:
  void Answer(Connection& c, uint64_t tag, const absl::StatusOr<v1::FastResponse>& answer) {
    c.Send(answer.ok() ? answer->SerializeAsString()
                       : Refusal(tag, answer.status()).SerializeAsString());
  }

  void BadMessage(Connection& c, uint64_t tag, absl::string_view what) {
    shared_.stats->Add(Statistic::kFastBadMessages);
    Answer(c, tag, absl::InvalidArgumentError(what));
  }

  FastPathShared& shared_;
  FastLeases leases_;
};

class FastPathServerImpl final : public FastPathServer, private ConnectionProtocol {
 public:
  FastPathServerImpl(ArtifactCache* cache, Statistics* stats, objects::ObjectCache* objects,
                     FastPathOptions options, std::unique_ptr<FastArena> arena)
      : shared_(cache, stats, objects, std::move(options), std::move(arena)),
        server_(ServerOptions(shared_.options), this) {}
  ~FastPathServerImpl() override { Stop(); }

  absl::Status Listen() {
    return server_.Start(ListenAddress{.address = "unix:" + shared_.options.socket_path,
                                       .mode = shared_.options.socket_mode,
                                       .backlog = 128,
                                       .flag = "--fast-socket"});
  }

  void Stop() override { server_.Stop(); }
  uint64_t accept_failures() const override { return server_.accept_failures(); }

  void Preload(const std::shared_ptr<const Artifact>& artifact) override {
    if (shared_.arena->Preload(artifact)) shared_.gauges.Publish();
  }

 private:
  static ConnectionServerOptions ServerOptions(const FastPathOptions& fast) {
    ConnectionServerOptions options;
    options.name = "fast path";
    options.framing = Framing::kPackets;
    options.threads = fast.threads;
    options.max_connections = fast.max_connections;
    options.accepts_per_turn = kFastBatch;
    options.read_bytes = kMaxFastMessageBytes;
    options.max_reads_per_turn = kFastBatch;
    options.socket_buffer_bytes = kSocketBufferBytes;
    return options;
  }

  // The greeting: the arena's size and descriptor (SCM_RIGHTS).
  std::unique_ptr<ConnectionHandler> Open(Connection& c) override {
    v1::FastHello hello;
    hello.set_version(1);
    hello.set_arena_bytes(shared_.arena->size());
    if (!c.SendNow(hello.SerializeAsString(), shared_.arena->fd()).ok()) return nullptr;
    return std::make_unique<FastPathConnection>(&shared_);
  }

  std::string Refusal() override {
    shared_.stats->Add(Statistic::kFastConnectionsRefused);
    v1::FastHello hello;
    hello.set_version(1);
    hello.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
    hello.set_message(absl::StrCat("kcached serves at most ", shared_.options.max_connections,
                                   " fast-path connections (--fast-max-connections); use gRPC"));
    return hello.SerializeAsString();
  }

  FastPathShared shared_;
  ConnectionServer server_;  // last: stopped (its connections' leases given back) first
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
