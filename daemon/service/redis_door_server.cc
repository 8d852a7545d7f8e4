// The Redis door: RESP connections over ConnectionServer, answered within the door's bounds.
#include "daemon/service/redis_door_server.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/byte_budget.h"
#include "daemon/service/connection_server.h"

namespace kcache {
namespace {

// Counts `count` in its redis.* statistic (a gauge, kConnections, moves by `n`).
void Count(Statistics& stats, RedisDoorCount count, int64_t n) {
  using C = RedisDoorCount;
  using S = Statistic;
  static constexpr std::pair<C, S> kStatistics[] = {
      {C::kHit, S::kRedisHits},
      {C::kMiss, S::kRedisMisses},
      {C::kBytesIn, S::kRedisBytesIn},
      {C::kBytesOut, S::kRedisBytesOut},
      {C::kSet, S::kRedisSets},
      {C::kRefusedValueTooBig, S::kRedisRefusedValueTooBig},
      {C::kRefusedNamespace, S::kRedisRefusedNamespace},
      {C::kRefusedCommand, S::kRedisRefusedCommand},
      {C::kRefusedProtocol, S::kRedisRefusedProtocol},
      {C::kRefusedConnections, S::kRedisRefusedConnections},
      {C::kRefusedBuffer, S::kRedisRefusedBuffer},
      {C::kIdleClosed, S::kRedisIdleClosed},
      {C::kStoreError, S::kRedisStoreErrors},
      {C::kConnections, S::kRedisConnections},
      {C::kRefusedDriverTooOld, S::kRedisRefusedDriverTooOld},
      {C::kRefusedToolkitUnknown, S::kRedisRefusedToolkitUnknown},
      {C::kRefusedTotal, S::kRedisRefusedTotal},
      {C::kRefusedKeyTooBig, S::kRedisRefusedKeyTooBig},
  };
  static_assert(
      [] {
        for (size_t i = 0; i < std::size(kStatistics); ++i) {
          if (static_cast<size_t>(kStatistics[i].first) != i) return false;
        }
        return static_cast<size_t>(C::kRefusedKeyTooBig) + 1 == std::size(kStatistics);
      }(),
      "a statistic for every RedisDoorCount, in the enum's order");
  stats.Move(kStatistics[static_cast<size_t>(count)].second, n);
}

// Bytes read at once: what a connection may add to the door's total before it is checked.
constexpr size_t kReadBytes = 64 << 10;
// Bytes read from one connection per turn before the thread serves another.
constexpr size_t kTurnBytes = 4 << 20;
// What a connection may hold whatever the others hold (--redis-total-max-bytes aside): a
// small command and its reply always go through, so a client is answered under any load.
constexpr uint64_t kSmallBytes = RedisCommands::kSmallReplyBytes;

uint64_t ArgumentBytes(const resp::Command& command) {
  uint64_t bytes = 0;
  for (const std::string& arg : command.args) bytes += arg.size();
  return bytes;
}

// What every connection shares: the commands, the bounds and the budget of the total.
struct RedisDoorShared {
  RedisDoorShared(objects::ObjectCache* objects, Statistics* stats_in, RedisDoorOptions options_in)
      : stats(stats_in),
        options(std::move(options_in)),
        commands(objects, options.commands,
                 [stats_in](RedisDoorCount count, int64_t n) { Count(*stats_in, count, n); }),
        budget(options.max_total_bytes, stats_in, Statistic::kRedisHeldBytes) {
    limits.max_argument_bytes = options.commands.max_value_bytes;
  }

  Statistics* const stats;
  const RedisDoorOptions options;
  const RedisCommands commands;
  ByteBudget budget;  // what every connection holds (--redis-total-max-bytes)
  resp::ParserLimits limits;
};

// One connection: RESP framed, each command answered in order within the door's bounds.
// Its replies are checked against the bounds as they are built: one that does not fit waits,
// unanswered (`waiting`), until the client has read the replies before it.
class RedisConnection final : public ConnectionHandler {
 public:
  RedisConnection(RedisDoorShared* door, uint64_t id) : door_(*door), parser_(door->limits) {
    session_.id = static_cast<int64_t>(id);
    Count(*door_.stats, RedisDoorCount::kConnections, 1);
  }
  ~RedisConnection() override {
    door_.budget.Recharge(&charged_, 0);
    Count(*door_.stats, RedisDoorCount::kConnections, -1);
  }

  // Every reply before it is sent: the command waiting is answered now, or refused; else the
  // door's total decides whether this connection may read more.
  Next BeforeRead(Connection& c) override {
    door_.budget.Recharge(&charged_, held(c));
    if (waiting_) {
      Answer(c);
      return Next::kAgain;
    }
    if (held(c) >= kSmallBytes && door_.budget.room() < kReadBytes) {
      RefuseOverTotal(c);
      return Next::kEndTurn;
    }
    return Next::kRead;
  }

  void OnInput(Connection& c, absl::string_view input) override {
    parser_.Feed(input);
    door_.budget.Recharge(&charged_, held(c));
    Answer(c);
  }

  void EndTurn(Connection& c) override { door_.budget.Recharge(&charged_, held(c)); }
  bool Waiting() const override { return waiting_.has_value(); }
  void OnIdle(Connection& c) override { Count(*door_.stats, RedisDoorCount::kIdleClosed, 1); }

 private:
  // What it holds: input not yet answered, the command waiting, replies not yet sent.
  uint64_t held(const Connection& c) const {
    return parser_.buffered() + waiting_bytes_ + c.unsent_bytes();
  }

  // More input would pass --redis-total-max-bytes, and this connection holds an unfinished
  // command of its own: refused (it cannot be framed past the bytes dropped), then closed.
  void RefuseOverTotal(Connection& c) {
    Count(*door_.stats, RedisDoorCount::kRefusedTotal, 1);
    resp::AppendError(
        *c.stream_output(),
        absl::StrCat("ERR kcached's Redis door holds ", door_.budget.held(),
                     " bytes for all its connections, at --redis-total-max-bytes ",
                     door_.budget.limit(), ": this connection's unfinished command of ",
                     parser_.buffered(), " bytes is dropped; retry later"));
    c.CloseAfterSending();
  }

  // The room a reply has now: this connection's bound less what it holds, and the door's
  // total less what every connection holds (small replies always fit: kSmallBytes).
  uint64_t ReplyRoom(const Connection& c) const {
    uint64_t held = parser_.buffered() + c.unsent_bytes();
    uint64_t bound = door_.options.max_buffer_bytes;
    uint64_t own = held >= bound ? 0 : bound - held;
    return std::min(own, std::max(door_.budget.room(), kSmallBytes));
  }

  // Answers the commands read, in order, while their replies fit (the command waiting
  // first); stops at one that does not fit while replies wait to be sent (asked again once
  // they are), and refuses one that does not fit with nothing to wait for.
  void Answer(Connection& c) {
    std::string* out = c.stream_output();
    while (!c.closing()) {
      if (!waiting_) {
        absl::StatusOr<std::optional<resp::Command>> command = parser_.Next();
        if (!command.ok()) {
          Count(*door_.stats, RedisDoorCount::kRefusedProtocol, 1);
          resp::AppendError(
              *out, absl::StrCat("ERR ", command.status().message(), "; closing the connection"));
          c.CloseAfterSending();
          return;
        }
        if (!*command) break;
        waiting_ = std::move(*command);
        waiting_bytes_ = ArgumentBytes(*waiting_);
      }
      RedisExecuted done = door_.commands.Execute(*waiting_, session_, out, ReplyRoom(c));
      if (!done.answered) {
        if (c.unsent_bytes() > 0) break;  // the client reads what waits first
        RefuseReply(c, done.needed);
      }
      waiting_.reset();
      waiting_bytes_ = 0;
      if (session_.quit) c.CloseAfterSending();
    }
    if (parser_.buffered() + c.unsent_bytes() > door_.options.max_buffer_bytes) {
      Count(*door_.stats, RedisDoorCount::kRefusedBuffer, 1);
      resp::AppendError(*out, absl::StrCat("ERR over kcached's --redis-buffer-max-bytes ",
                                           door_.options.max_buffer_bytes,
                                           " of unanswered input; closing the connection"));
      c.CloseAfterSending();
    }
  }

  // A reply of `needed` bytes that does not fit with no other reply of this connection's
  // waiting: over the connection's bound, or over the door's total now.
  void RefuseReply(Connection& c, uint64_t needed) {
    uint64_t input = parser_.buffered();
    if (needed + input > door_.options.max_buffer_bytes) {
      Count(*door_.stats, RedisDoorCount::kRefusedBuffer, 1);
      resp::AppendError(
          *c.stream_output(),
          absl::StrCat("ERR a reply of ", needed, " bytes (beside ", input,
                       " bytes of input read) is over kcached's "
                       "--redis-buffer-max-bytes ",
                       door_.options.max_buffer_bytes, ": not sent; ask for less at once"));
      return;
    }
    Count(*door_.stats, RedisDoorCount::kRefusedTotal, 1);
    resp::AppendError(*c.stream_output(),
                      absl::StrCat("ERR kcached's Redis door holds ", door_.budget.held(),
                                   " bytes for all its connections: a reply of ", needed,
                                   " bytes would pass --redis-total-max-bytes ",
                                   door_.budget.limit(), "; retry later"));
  }

  RedisDoorShared& door_;
  resp::Parser parser_;
  RedisSession session_;
  // A command parsed but not answered: its reply waits for the client to read what is sent.
  std::optional<resp::Command> waiting_;
  uint64_t waiting_bytes_ = 0;  // its arguments'
  uint64_t charged_ = 0;        // what this connection holds in the door's ByteBudget
};

class RedisDoorServerImpl final : public RedisDoorServer, private ConnectionProtocol {
 public:
  RedisDoorServerImpl(objects::ObjectCache* objects, Statistics* stats, RedisDoorOptions options)
      : door_(objects, stats, std::move(options)), server_(ServerOptions(door_.options), this) {}
  ~RedisDoorServerImpl() override { Stop(); }

  absl::Status Listen() {
    return server_.Start(ListenAddress{.address = door_.options.listen,
                                       .mode = door_.options.socket_mode,
                                       .backlog = 1024,
                                       .flag = "--redis-listen"});
  }
  void Stop() override { server_.Stop(); }
  int port() const override { return server_.port(); }

 private:
  static ConnectionServerOptions ServerOptions(const RedisDoorOptions& door) {
    ConnectionServerOptions options;
    options.name = "Redis door";
    options.framing = Framing::kStream;
    options.threads = door.threads;
    options.max_connections = door.max_connections;
    options.accepts_per_turn = 64;
    options.read_bytes = kReadBytes;
    options.max_turn_bytes = kTurnBytes;
    options.idle_timeout = door.idle_timeout;
    return options;
  }

  std::unique_ptr<ConnectionHandler> Open(Connection& c) override {
    return std::make_unique<RedisConnection>(&door_, c.id());
  }

  std::string Refusal() override {
    Count(*door_.stats, RedisDoorCount::kRefusedConnections, 1);
    std::string refusal;
    resp::AppendError(refusal, absl::StrCat("ERR max number of clients reached: kcached's "
                                            "Redis door serves at most ",
                                            door_.options.max_connections,
                                            " connections (--redis-max-connections)"));
    return refusal;
  }

  RedisDoorShared door_;
  ConnectionServer server_;  // last: stopped (its connections closed) before door_ goes
};

}  // namespace

absl::StatusOr<std::unique_ptr<RedisDoorServer>> RedisDoorServer::Start(
    objects::ObjectCache* objects, Statistics* stats, RedisDoorOptions options) {
  if (options.max_buffer_bytes < options.commands.max_value_bytes + (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--redis-buffer-max-bytes ", options.max_buffer_bytes,
        " must be at least --redis-value-max-bytes + 1 MiB: a SET of the largest value must fit"));
  }
  if (options.max_total_bytes < options.max_buffer_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis-total-max-bytes ", options.max_total_bytes,
                     " must be at least --redis-buffer-max-bytes ", options.max_buffer_bytes,
                     ": one connection's command of the largest value must fit"));
  }
  auto server = std::make_unique<RedisDoorServerImpl>(objects, stats, std::move(options));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return std::unique_ptr<RedisDoorServer>(std::move(server));
}

}  // namespace kcache
