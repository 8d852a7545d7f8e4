#include "engine/shared/redis_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

RedisReply CopyReply(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(CopyReply(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

RedisConnection::RedisConnection(RedisAddress address, absl::Duration connect_timeout,
                                 absl::Duration io_timeout)
    : address_(std::move(address)), connect_timeout_(connect_timeout), io_timeout_(io_timeout) {}

RedisConnection::~RedisConnection() {
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) redisFree(context_);
}

absl::Status RedisConnection::Fail(absl::string_view what) {
  std::string message = absl::StrCat("redis ", address_.ToString(), ": ", what);
  if (context_ != nullptr) {
    if (context_->err != 0) absl::StrAppend(&message, ": ", context_->errstr);
    redisFree(context_);
    context_ = nullptr;
  }
  return absl::UnavailableError(message);
}

absl::Status RedisConnection::EnsureOpen(absl::Duration budget) {
  if (context_ == nullptr) {
    context_ = redisConnectWithTimeout(address_.host.c_str(), address_.port,
                                       absl::ToTimeval(std::min(connect_timeout_, budget)));
    if (context_ == nullptr) return absl::UnavailableError("redis: out of memory");
    if (context_->err != 0) return Fail("cannot connect");
  }
  if (redisSetTimeout(context_, absl::ToTimeval(std::min(io_timeout_, budget))) != REDIS_OK) {
    return Fail("cannot set the timeout");
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisRawReply> RedisConnection::Call(const std::vector<std::string>& args,
                                                    bool asking, absl::Duration budget) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status open = EnsureOpen(std::max(budget, absl::Milliseconds(1))); !open.ok())
    return open;
  if (asking) {
    const char* asking_argv[] = {"ASKING"};
    size_t asking_len[] = {6};
    if (redisAppendCommandArgv(context_, 1, asking_argv, asking_len) != REDIS_OK) {
      return Fail("cannot send ASKING");
    }
  }
  if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(),
                             lengths.data()) != REDIS_OK) {
    return Fail("cannot send");
  }
  void* raw = nullptr;
  if (asking) {
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return Fail("no reply");
    freeReplyObject(raw);  // +OK to ASKING
    raw = nullptr;
  }
  if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return Fail("no reply");
  auto* reply = static_cast<redisReply*>(raw);
  RedisRawReply out;
  if (reply->type == REDIS_REPLY_ERROR) {
    out.error = std::string(reply->str, reply->len);
  } else {
    out.reply = CopyReply(reply);
  }
  freeReplyObject(reply);
  return out;
}

}  // namespace kcache
