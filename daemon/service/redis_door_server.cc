// The Redis door: RESP connections over ConnectionServer, answered within the door's bounds.
#include "daemon/service/redis_door_server.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/cache/statistics.h"
#include "daemon/service/byte_budget.h"
#include "daemon/service/connection_server.h"
#include "daemon/service/peer_identity.h"

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

// Bytes read at once.
constexpr size_t kReadBytes = 64 << 10;
// Bytes read from one connection per turn before the thread serves another.
constexpr size_t kTurnBytes = 4 << 20;
// A reply this small is built without asking for room (RedisCommands::Execute).
constexpr uint64_t kSmallBytes = RedisCommands::kSmallReplyBytes;
// What a connection may hold whatever the others hold (--redis-total-max-bytes aside): a read
// and a small reply, so a connection holding under kSmallBytes is always answered, and the
// door holds at most --redis-total-max-bytes plus this per connection.
constexpr uint64_t kAllowanceBytes = kSmallBytes + kReadBytes;

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
  // Every byte the connections hold, counted before it is held; what passes a connection's
  // kAllowanceBytes is taken only where it fits --redis-total-max-bytes.
  ByteBudget budget;
  resp::ParserLimits limits;
};

// One connection: RESP framed, each command answered in order within the door's bounds.
// What it holds (input, the command being answered, replies) is counted in the door's budget
// before it is held (charged_ >= held() between calls). A reply that does not fit this
// connection's bound waits, unanswered (`waiting_`), until the client has read the replies
// before it; one that does not fit the door's total is refused at once.
class RedisConnection final : public ConnectionHandler {
 public:
  RedisConnection(RedisDoorShared* door, uint64_t id, std::string peer)
      : door_(*door), parser_(std::in_place, door->limits) {
    session_.id = static_cast<int64_t>(id);
    session_.peer = std::move(peer);
    Count(*door_.stats, RedisDoorCount::kConnections, 1);
  }
  ~RedisConnection() override {
    door_.budget.Recharge(&charged_, 0);
    Count(*door_.stats, RedisDoorCount::kConnections, -1);
  }

  // Every reply before it is sent: the command waiting is answered now, or refused; else a
  // read's bytes are counted before it is made.
  Next BeforeRead(Connection& c) override {
    Settle(c);
    if (waiting_) {
      Answer(c);
      return Next::kAgain;
    }
    if (!Reserve(kReadBytes)) {
      RefuseOverTotal(c);
      return Next::kEndTurn;
    }
    return Next::kRead;
  }

  void OnInput(Connection& c, absl::string_view input) override {
    parser_->Feed(input);  // within the read's bytes, counted in BeforeRead
    Settle(c);
    Answer(c);
  }

  void EndTurn(Connection& c) override { Settle(c); }
  bool Waiting() const override { return waiting_.has_value(); }
  void OnIdle(Connection& c) override { Count(*door_.stats, RedisDoorCount::kIdleClosed, 1); }

 private:
  // What it holds: input not yet answered, the command being answered, the key of the last
  // GET refused over the total, replies not yet sent (and those sent from their buffer).
  uint64_t held(const Connection& c) const {
    return parser_->buffered() + waiting_bytes_ + refused_key_.size() + c.output_bytes();
  }

  // Counts `bytes` more for this connection before it holds them: always within its
  // allowance, past it only where they fit the door's total. False: nothing counted.
  bool Reserve(uint64_t bytes) {
    if (charged_ + bytes <= kAllowanceBytes) {
      door_.budget.Take(bytes);
    } else if (!door_.budget.TryTake(bytes)) {
      return false;
    }
    charged_ += bytes;
    return true;
  }
  // Gives back what was counted and is not held (a read that took less, replies sent).
  void Settle(const Connection& c) {
    uint64_t now = held(c);
    if (now < charged_) door_.budget.Recharge(&charged_, now);
  }

  // This connection's bound less what it holds beside the command being answered.
  uint64_t OwnRoom(const Connection& c) const {
    uint64_t held = parser_->buffered() + c.output_bytes();
    uint64_t bound = door_.options.max_buffer_bytes;
    return held >= bound ? 0 : bound - held;
  }

  // More input would pass --redis-total-max-bytes, and this connection holds more than its
  // allowance (an unfinished command of its own, or commands read and not answered): refused
  // (the stream cannot be framed past the bytes dropped), then closed. What it read is let go
  // before the refusal is written.
  void RefuseOverTotal(Connection& c) {
    Count(*door_.stats, RedisDoorCount::kRefusedTotal, 1);
    const uint64_t dropped = DropInput();
    c.CloseAfterSending();
    Refuse(c, absl::StrCat("ERR kcached's Redis door holds ", door_.budget.held(),
                           " bytes for all its connections, at --redis-total-max-bytes ",
                           door_.budget.limit(), ": this connection's ", dropped,
                           " bytes of commands not answered are dropped; retry later"));
  }

  // Appends a refusal line. Its bytes are counted first: what is counted and not held covers
  // them (the room made for the reply it replaces, the input a closing refusal dropped), else
  // the connection's allowance or the total; where none has room (a closing connection that
  // dropped less than the line) they are counted as they are held.
  void Refuse(Connection& c, absl::string_view line) {
    const uint64_t bytes = held(c) + line.size() + 3;  // '-', CRLF
    if (bytes > charged_ && !Reserve(bytes - charged_)) door_.budget.Recharge(&charged_, bytes);
    resp::AppendError(*c.stream_output(), line);
  }

  // Drops the input read and not answered, for a refusal that closes the connection.
  uint64_t DropInput() {
    const uint64_t dropped = parser_->buffered() + waiting_bytes_;
    parser_.emplace(door_.limits);
    waiting_.reset();
    waiting_bytes_ = 0;
    return dropped;
  }

  // The room a reply may have (RedisCommands::Execute asks before it grows past
  // kSmallBytes): within this connection's bound, and counted in the door's total.
  bool MakeRoom(uint64_t bytes) {
    if (bytes <= reply_room_) return true;
    if (bytes > own_room_ || !Reserve(bytes - reply_room_)) return false;
    reply_room_ = bytes;
    return true;
  }

  // A GET of the key last refused over the total, while the room it needed is not there:
  // refused without reading its value again.
  bool RefusedAgain() const {
    if (refused_key_.empty() || waiting_->args.size() != 2 || waiting_->args[1] != refused_key_ ||
        !absl::EqualsIgnoreCase(waiting_->args[0], "GET")) {
      return false;
    }
    return refused_bytes_ <= own_room_ && refused_bytes_ > door_.budget.room() &&
           charged_ + refused_bytes_ > kAllowanceBytes;
  }

  // Answers the commands read, in order (the command waiting first), each once room for its
  // reply is counted; stops at one that does not fit this connection's bound while replies
  // wait to be sent (asked again once they are), and refuses one that does not fit the
  // door's total, or this connection's bound with nothing to wait for.
  void Answer(Connection& c) {
    while (!c.closing()) {
      if (!waiting_) {
        absl::StatusOr<std::optional<resp::Command>> command = parser_->Next();
        if (!command.ok()) {
          Count(*door_.stats, RedisDoorCount::kRefusedProtocol, 1);
          DropInput();
          Refuse(c, absl::StrCat("ERR ", command.status().message(), "; closing the connection"));
          c.CloseAfterSending();
          return;
        }
        if (!*command) break;
        waiting_ = std::move(*command);
        waiting_bytes_ = ArgumentBytes(*waiting_);
      }
      if (!AnswerWaiting(c)) break;  // the client reads what waits first
      waiting_.reset();
      waiting_bytes_ = 0;
      reply_room_ = 0;
      Settle(c);
      if (session_.quit) c.CloseAfterSending();
    }
    if (parser_->buffered() + c.output_bytes() > door_.options.max_buffer_bytes) {
      Count(*door_.stats, RedisDoorCount::kRefusedBuffer, 1);
      DropInput();
      Refuse(c, absl::StrCat("ERR over kcached's --redis-buffer-max-bytes ",
                             door_.options.max_buffer_bytes,
                             " of unanswered input; closing the connection"));
      c.CloseAfterSending();
    }
  }

  // Answers or refuses the command waiting; false when it waits for the client to read the
  // replies before it.
  bool AnswerWaiting(Connection& c) {
    if (!Reserve(kSmallBytes)) {
      // Over its allowance, with the total full: its replies are read first, else it is
      // closed (it holds commands it cannot answer).
      if (c.unsent_bytes() > 0) return false;
      RefuseOverTotal(c);
      return true;
    }
    reply_room_ = kSmallBytes;
    own_room_ = OwnRoom(c);
    if (RefusedAgain()) {
      RefuseTotal(c, refused_bytes_);
      return true;
    }
    RedisExecuted done = door_.commands.Execute(*waiting_, session_, c.stream_output(),
                                                [this](uint64_t bytes) { return MakeRoom(bytes); });
    if (done.answered) {
      std::string().swap(refused_key_);
      return true;
    }
    if (done.needed <= own_room_) {
      RefuseTotal(c, done.needed);
      return true;
    }
    if (c.unsent_bytes() > 0) {
      reply_room_ = 0;
      Settle(c);
      return false;
    }
    Count(*door_.stats, RedisDoorCount::kRefusedBuffer, 1);
    Refuse(c, absl::StrCat("ERR a reply of ", done.needed, " bytes (beside ", parser_->buffered(),
                           " bytes of input read) is over kcached's --redis-buffer-max-bytes ",
                           door_.options.max_buffer_bytes, ": not sent; ask for less at once"));
    return true;
  }

  // A reply of `needed` bytes that fits this connection's bound but not the door's total
  // now: refused at once. A GET's key is kept, so that the same GET is refused again without
  // reading its value while the room is not there.
  void RefuseTotal(Connection& c, uint64_t needed) {
    Count(*door_.stats, RedisDoorCount::kRefusedTotal, 1);
    Refuse(c, absl::StrCat("ERR kcached's Redis door holds ", door_.budget.held(),
                           " bytes for all its connections: a reply of ", needed,
                           " bytes would pass --redis-total-max-bytes ", door_.budget.limit(),
                           "; retry later"));
    if (waiting_->args.size() == 2 && absl::EqualsIgnoreCase(waiting_->args[0], "GET")) {
      if (waiting_->args[1] != refused_key_) refused_key_ = std::move(waiting_->args[1]);
      refused_bytes_ = needed;
    }
  }

  RedisDoorShared& door_;
  std::optional<resp::Parser> parser_;  // always set; emplaced anew to drop its input
  RedisSession session_;
  // A command parsed but not answered: its reply waits for the client to read what is sent.
  std::optional<resp::Command> waiting_;
  uint64_t waiting_bytes_ = 0;  // its arguments'
  uint64_t reply_room_ = 0;     // bytes counted for its reply, while it is answered
  uint64_t own_room_ = 0;       // this connection's bound left for that reply
  std::string refused_key_;     // the last GET refused over the total, while nothing is answered
  uint64_t refused_bytes_ = 0;  // the room its reply needed
  uint64_t charged_ = 0;        // what this connection has counted in the door's budget
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
  uint64_t accept_failures() const override { return server_.accept_failures(); }

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
    return std::make_unique<RedisConnection>(&door_, c.id(), PeerOfSocket(c.descriptor()).words);
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
