// The Redis door's commands: checked, answered from the object cache, counted.
#include "daemon/service/redis_commands.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/load_check.h"
#include "core/process_identity.h"
#include "engine/objects/named_object.h"

namespace kcache {

using Count = RedisDoorCount;

struct RedisCommands::Call {
  const std::vector<std::string>& args;
  RedisSession& session;
  std::string& out;
  const absl::FunctionRef<bool(uint64_t)> room;
  RedisExecuted result;

  // Whether this reply may grow to `bytes` (small ones always may).
  bool Fits(uint64_t bytes) const { return bytes <= kSmallReplyBytes || room(bytes); }

  void Error(absl::string_view text) const { resp::AppendError(out, text); }
  void Ok() const { resp::AppendSimple(out, "OK"); }
  void Null() const { resp::AppendNull(out, session.protocol); }
};

namespace {

// The bytes of a bulk reply of `size` bytes: $<size>CRLF<bytes>CRLF.
uint64_t BulkBytes(size_t size) { return absl::StrCat(size).size() + size + 5; }
// The bytes of a null reply, RESP2's $-1CRLF (RESP3's _CRLF is shorter).
constexpr uint64_t kNullBytes = 5;

std::string Upper(absl::string_view text) { return absl::AsciiStrToUpper(text); }

std::string Printable(absl::string_view text) {
  std::string out(text.substr(0, 64));
  for (char& c : out) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return out;
}

}  // namespace

RedisCommands::RedisCommands(objects::ObjectCache* cache, RedisCommandOptions options,
                             std::function<void(RedisDoorCount, int64_t)> count)
    : cache_(cache), options_(std::move(options)), count_(std::move(count)), node_(HostName()) {}

RedisExecuted RedisCommands::Execute(const resp::Command& command, RedisSession& session,
                                     std::string* reply,
                                     absl::FunctionRef<bool(uint64_t bytes)> room) const {
  Call call{command.args, session, *reply, room, {}};
  Dispatch(command, call);
  return call.result;
}

RedisExecuted RedisCommands::Execute(const resp::Command& command, RedisSession& session,
                                     std::string* reply, uint64_t room) const {
  return Execute(command, session, reply, [room](uint64_t bytes) { return bytes <= room; });
}

void RedisCommands::Dispatch(const resp::Command& command, Call& call) const {
  struct CommandSpec {
    absl::string_view name;
    size_t min_args, max_args;  // counting the name; kAny: any number
    void (RedisCommands::*handler)(Call&) const;
  };
  static constexpr size_t kAny = SIZE_MAX;
  static const CommandSpec kCommands[] = {
      {"GET", 2, 2, &RedisCommands::Get},
      {"SET", 3, kAny, &RedisCommands::Set},
      {"MGET", 2, kAny, &RedisCommands::MultiGet},
      {"EXISTS", 2, kAny, &RedisCommands::Exists},
      {"DEL", 2, kAny, &RedisCommands::Delete},
      {"HELLO", 1, kAny, &RedisCommands::Hello},
      {"CLIENT", 2, kAny, &RedisCommands::Client},
      {"INFO", 1, kAny, &RedisCommands::Info},
      {"KCACHE.DRIVER", 1, kAny, &RedisCommands::Driver},
  };
  RedisSession& session = call.session;
  std::string* reply = &call.out;
  const std::string name = Upper(command.args.front());
  if (command.oversized_bytes > 0) {
    count_(Count::kRefusedValueTooBig, 1);
    return call.Error(absl::StrCat("ERR an argument of ", command.oversized_bytes,
                                   " bytes is over kcached's --redis-value-max-bytes ",
                                   options_.max_value_bytes, ": not stored"));
  }
  const size_t argc = command.args.size();
  auto arity = [&] {
    count_(Count::kRefusedCommand, 1);
    call.Error(absl::StrCat("ERR wrong number of arguments for '", absl::AsciiStrToLower(name),
                            "' command"));
  };
  for (const CommandSpec& spec : kCommands) {
    if (name != spec.name) continue;
    if (argc < spec.min_args || argc > spec.max_args) return arity();
    return (this->*spec.handler)(call);
  }
  if (name == "PING" && argc <= 2) {
    return argc == 2 ? Bulk(call, command.args[1]) : resp::AppendSimple(*reply, "PONG");
  }
  if (name == "ECHO" && argc == 2) return Bulk(call, command.args[1]);
  if (name == "SELECT" && argc == 2) {
    if (command.args[1] == "0") return call.Ok();
    count_(Count::kRefusedCommand, 1);
    return call.Error("ERR DB index is out of range: kcache's Redis door has database 0 only");
  }
  if (name == "COMMAND") return resp::AppendArrayHeader(*reply, 0);
  if (name == "QUIT") {
    session.quit = true;
    return call.Ok();
  }
  if (name == "PING" || name == "ECHO" || name == "SELECT") return arity();
  count_(Count::kRefusedCommand, 1);
  call.Error(absl::StrCat("ERR unknown command '", Printable(command.args.front()),
                          "': kcache's Redis door serves GET, SET, MGET, EXISTS, DEL, PING, "
                          "HELLO, CLIENT, SELECT 0, INFO, COMMAND, QUIT, KCACHE.DRIVER "
                          "(docs/torch-compile.md)"));
}

std::string RedisCommands::CheckKey(const std::string& key) const {
  if (key.size() > options_.max_key_bytes) {
    count_(Count::kRefusedKeyTooBig, 1);
    return absl::StrCat("ERR a key of ", key.size(),
                        " bytes is over kcached's --redis-key-max-bytes ", options_.max_key_bytes,
                        ": keys are listed, so they stay small");
  }
  size_t colon = key.find(':');
  absl::string_view space = absl::string_view(key).substr(0, colon);
  if (colon != std::string::npos &&
      std::find(options_.namespaces.begin(), options_.namespaces.end(), space) !=
          options_.namespaces.end()) {
    return "";
  }
  count_(Count::kRefusedNamespace, 1);
  return absl::StrCat("ERR key '", Printable(key), "' is outside the namespaces kcache serves (",
                      absl::StrJoin(options_.namespaces, ", "),
                      "): a key must start with one and ':' (kcached --redis-namespaces)");
}

void RedisCommands::Bulk(Call& call, absl::string_view value) const {
  uint64_t needed = BulkBytes(value.size());
  if (!call.Fits(needed)) {
    call.result = RedisExecuted{false, needed};
    return;
  }
  resp::AppendBulk(call.out, value);
}

void RedisCommands::Get(Call& call) const {
  if (std::string refused = CheckKey(call.args[1]); !refused.empty()) {
    return call.Error(refused);
  }
  absl::StatusOr<std::string> value = objects::GetNamedObject(*cache_, call.args[1]);
  if (!value.ok() || !LoadsOnDriver(call.session, *value)) {
    count_(Count::kMiss, 1);
    return call.Null();
  }
  Bulk(call, *value);
  if (!call.result.answered) return;  // asked again once there is room: counted then
  count_(Count::kHit, 1);
  count_(Count::kBytesOut, static_cast<int64_t>(value->size()));
}

void RedisCommands::MultiGet(Call& call) const {
  for (size_t i = 1; i < call.args.size(); ++i) {
    if (std::string refused = CheckKey(call.args[i]); !refused.empty()) {
      return call.Error(refused);
    }
  }
  const size_t start = call.out.size();
  resp::AppendArrayHeader(call.out, call.args.size() - 1);
  int64_t hits = 0, misses = 0, bytes = 0;
  std::vector<absl::Status> not_loaded;  // counted once the reply is answered
  for (size_t i = 1; i < call.args.size(); ++i) {
    absl::StatusOr<std::string> value = objects::GetNamedObject(*cache_, call.args[i]);
    absl::Status loads =
        value.ok() ? CheckCubinForDriver(*value, call.session.driver) : absl::OkStatus();
    const bool hit = value.ok() && loads.ok();
    // Asked before it is built: the reply never grows past the room it was given.
    uint64_t grown = call.out.size() - start + (hit ? BulkBytes(value->size()) : kNullBytes);
    if (!call.Fits(grown)) {
      // At least this much: the caller waits for room or refuses, then asks again.
      call.result = RedisExecuted{false, grown};
      call.out.resize(start);
      return;
    }
    if (!hit) {
      ++misses;
      if (!loads.ok()) not_loaded.push_back(std::move(loads));
      call.Null();
    } else {
      ++hits;
      bytes += static_cast<int64_t>(value->size());
      resp::AppendBulk(call.out, *value);
    }
  }
  for (const absl::Status& refused : not_loaded) CountNotLoaded(refused);
  count_(Count::kHit, hits);
  count_(Count::kMiss, misses);
  count_(Count::kBytesOut, bytes);
}

void RedisCommands::Set(Call& call) const {
  const std::vector<std::string>& args = call.args;
  bool only_new = false, only_existing = false;
  for (size_t i = 3; i < args.size(); ++i) {
    std::string option = Upper(args[i]);
    int64_t number = 0;
    if (option == "NX") {
      only_new = true;
    } else if (option == "XX") {
      only_existing = true;
    } else if (option == "KEEPTTL") {
      // Accepted: values have no time to live here.
    } else if ((option == "EX" || option == "PX" || option == "EXAT" || option == "PXAT") &&
               i + 1 < args.size() && absl::SimpleAtoi(args[i + 1], &number) && number > 0) {
      ++i;  // accepted and ignored: the store's LRU bound decides how long a value stays
    } else {
      count_(Count::kRefusedCommand, 1);
      return call.Error(absl::StrCat("ERR syntax error at SET option '", Printable(args[i]),
                                     "': kcache's Redis door takes NX, XX, KEEPTTL and "
                                     "EX/PX/EXAT/PXAT with a positive number"));
    }
  }
  if (only_new && only_existing) {
    count_(Count::kRefusedCommand, 1);
    return call.Error("ERR syntax error: SET takes NX or XX, not both");
  }
  if (std::string refused = CheckKey(args[1]); !refused.empty()) return call.Error(refused);
  if ((only_new || only_existing) && objects::HoldsNamedObject(*cache_, args[1]) == only_new) {
    return call.Null();  // not set
  }
  absl::Status put = objects::PutNamedObject(
      *cache_, args[1], args[2],
      absl::StrCat(call.session.peer, " via kcached's Redis door on ", node_));
  if (!put.ok()) {
    count_(absl::IsResourceExhausted(put) ? Count::kRefusedValueTooBig : Count::kStoreError, 1);
    return call.Error(absl::StrCat("ERR kcache did not store the value: ", put.message()));
  }
  count_(Count::kSet, 1);
  count_(Count::kBytesIn, static_cast<int64_t>(args[2].size()));
  call.Ok();
}

void RedisCommands::Exists(Call& call) const {
  int64_t found = 0;
  for (size_t i = 1; i < call.args.size(); ++i) {
    if (std::string refused = CheckKey(call.args[i]); !refused.empty()) {
      return call.Error(refused);
    }
    if (objects::HoldsNamedObject(*cache_, call.args[i])) ++found;
  }
  resp::AppendInteger(call.out, found);
}

void RedisCommands::Delete(Call& call) const {
  int64_t deleted = 0;
  for (size_t i = 1; i < call.args.size(); ++i) {
    if (std::string refused = CheckKey(call.args[i]); !refused.empty()) {
      return call.Error(refused);
    }
  }
  // A key counts when it was held and is gone: a baked store's entry is served but never
  // deleted (docs/torch-compile.md), so DEL of one answers 0.
  for (size_t i = 1; i < call.args.size(); ++i) {
    if (!objects::HoldsNamedObject(*cache_, call.args[i])) continue;
    absl::Status deleted_one = objects::DeleteNamedObject(*cache_, call.args[i]);
    if (!deleted_one.ok()) {
      count_(Count::kStoreError, 1);
      return call.Error(absl::StrCat("ERR kcache did not delete: ", deleted_one.message()));
    }
    if (!objects::HoldsNamedObject(*cache_, call.args[i])) ++deleted;
  }
  resp::AppendInteger(call.out, deleted);
}

void RedisCommands::Hello(Call& call) const {
  const std::vector<std::string>& args = call.args;
  int protocol = call.session.protocol;
  if (args.size() >= 2 && (!absl::SimpleAtoi(args[1], &protocol) || protocol < 2 || protocol > 3)) {
    count_(Count::kRefusedCommand, 1);
    return call.Error("NOPROTO unsupported protocol version: kcache's Redis door speaks 2 and 3");
  }
  for (size_t i = 2; i < args.size(); ++i) {
    std::string option = Upper(args[i]);
    if (option == "SETNAME" && i + 1 < args.size()) {
      ++i;
      continue;
    }
    count_(Count::kRefusedCommand, 1);
    return call.Error(
        option == "AUTH" ? "ERR kcache's Redis door has no users or passwords: connect "
                           "without AUTH (who may connect is the listen address's choice)"
                         : absl::StrCat("ERR syntax error in HELLO at '", Printable(args[i]), "'"));
  }
  call.session.protocol = protocol;
  std::string& out = call.out;
  resp::AppendMapHeader(out, 7, protocol);
  resp::AppendBulk(out, "server");
  resp::AppendBulk(out, "kcache");
  resp::AppendBulk(out, "version");
  resp::AppendBulk(out, options_.version);
  resp::AppendBulk(out, "proto");
  resp::AppendInteger(out, protocol);
  resp::AppendBulk(out, "id");
  resp::AppendInteger(out, call.session.id);
  resp::AppendBulk(out, "mode");
  resp::AppendBulk(out, "standalone");
  resp::AppendBulk(out, "role");
  resp::AppendBulk(out, "master");
  resp::AppendBulk(out, "modules");
  resp::AppendArrayHeader(out, 0);
}

void RedisCommands::Client(Call& call) const {
  std::string sub = Upper(call.args[1]);
  if ((sub == "SETINFO" && call.args.size() == 4) || (sub == "SETNAME" && call.args.size() == 3)) {
    return call.Ok();  // accepted; kcache keeps no client names
  }
  // redis-py 6.3 and later ask for maintenance notifications on connecting (RESP3): a door that
  // never moves a slot or fails over has none to send, so the request is granted as a no-op.
  if (sub == "MAINT_NOTIFICATIONS" && call.args.size() >= 3) return call.Ok();
  if (sub == "GETNAME" && call.args.size() == 2) return call.Null();
  if (sub == "ID" && call.args.size() == 2) return resp::AppendInteger(call.out, call.session.id);
  count_(Count::kRefusedCommand, 1);
  call.Error(absl::StrCat("ERR CLIENT ", Printable(call.args[1]),
                          " is not served by kcache's Redis door (SETINFO, SETNAME, GETNAME, ID, "
                          "MAINT_NOTIFICATIONS are)"));
}

void RedisCommands::Info(Call& call) const {
  std::string text = absl::StrCat(
      "# Server\r\nredis_version:7.2.0\r\nredis_mode:standalone\r\nkcache_version:",
      options_.version,
      "\r\n# kcache\r\nkcache_redis_door:1\r\nnamespaces:", absl::StrJoin(options_.namespaces, ","),
      "\r\nmax_value_bytes:", options_.max_value_bytes, "\r\n");
  resp::AppendBulk(call.out, text);
}

bool RedisCommands::LoadsOnDriver(const RedisSession& session, absl::string_view value) const {
  absl::Status loads = CheckCubinForDriver(value, session.driver);
  if (!loads.ok()) CountNotLoaded(loads);
  return loads.ok();
}

void RedisCommands::CountNotLoaded(const absl::Status& refused) const {
  count_(absl::IsFailedPrecondition(refused) ? Count::kRefusedDriverTooOld
                                             : Count::kRefusedToolkitUnknown,
         1);
}

void RedisCommands::Driver(Call& call) const {
  constexpr uint32_t kMinDriver = 1000, kMaxDriver = 99990;  // CUDA 1.0 .. 99.99
  constexpr absl::string_view kWhatToSend =
      "send the CUDA driver version as cuDriverGetVersion reports it, e.g. KCACHE.DRIVER 12090 "
      "for 12.9 (docs/torch-compile.md)";
  uint32_t driver = 0;
  if (call.args.size() != 2) {
    count_(Count::kRefusedCommand, 1);
    return call.Error(absl::StrCat("ERR KCACHE.DRIVER takes one argument, not ",
                                   call.args.size() - 1, ": ", kWhatToSend));
  }
  if (!absl::SimpleAtoi(call.args[1], &driver) || driver < kMinDriver || driver > kMaxDriver) {
    count_(Count::kRefusedCommand, 1);
    return call.Error(absl::StrCat("ERR KCACHE.DRIVER '", Printable(call.args[1]),
                                   "' is not a driver version from ", kMinDriver, " to ",
                                   kMaxDriver, ": ", kWhatToSend));
  }
  call.session.driver = driver;
  call.Ok();
}

}  // namespace kcache
