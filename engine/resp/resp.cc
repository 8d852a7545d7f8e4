// RESP parsing and reply writing.
#include "engine/resp/resp.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kcache::resp {
namespace {

// Compact once this much of the buffer has been parsed.
constexpr size_t kCompactBytes = 64 << 10;
// An emptied buffer larger than this is freed rather than kept.
constexpr size_t kKeepCapacity = 1 << 20;

absl::Status Framing(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Protocol error: ", what));
}

// A decimal length of at most 18 digits (no sign, no spaces): nullopt otherwise.
std::optional<uint64_t> ParseLength(absl::string_view digits) {
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

std::string Printable(absl::string_view text) {
  std::string out(text.substr(0, 32));
  for (char& c : out) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return out;
}

void AppendLine(std::string& out, char type, absl::string_view text) {
  out.push_back(type);
  size_t start = out.size();
  out.append(text.data(), text.size());
  std::replace_if(
      out.begin() + start, out.end(), [](char c) { return c == '\r' || c == '\n'; }, ' ');
  out.append("\r\n");
}

}  // namespace

absl::StatusOr<std::optional<absl::string_view>> Parser::Line() {
  absl::string_view rest(buffer_.data() + pos_, buffer_.size() - pos_);
  size_t end = rest.find("\r\n");
  if (end == absl::string_view::npos) {
    if (rest.size() > limits_.max_inline_bytes + 1) {  // + 1: a CR whose LF has not come
      return Framing(
          absl::StrCat("a line of more than ", limits_.max_inline_bytes, " bytes without CRLF"));
    }
    return std::optional<absl::string_view>();
  }
  if (end > limits_.max_inline_bytes) {
    return Framing(absl::StrCat("a line of ", end, " bytes, over ", limits_.max_inline_bytes));
  }
  pos_ += end + 2;
  return std::optional<absl::string_view>(rest.substr(0, end));
}

absl::Status Parser::StartCommand(absl::string_view line, std::optional<Command>* inline_command) {
  if (line.empty()) return absl::OkStatus();
  if (line[0] != '*') {  // an inline command: words separated by spaces
    Command command;
    for (absl::string_view word : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      if (word.size() > limits_.max_argument_bytes) {  // as a bulk string: read past, reported
        command.oversized_bytes = std::max<uint64_t>(command.oversized_bytes, word.size());
        word = "";
      }
      command.args.emplace_back(word);
    }
    if (command.args.size() > limits_.max_arguments) {
      return Framing(absl::StrCat("more than ", limits_.max_arguments, " arguments"));
    }
    if (!command.args.empty()) *inline_command = std::move(command);
    return absl::OkStatus();
  }
  absl::string_view count_text = line.substr(1);
  if (count_text == "-1" || count_text == "0") return absl::OkStatus();  // empty: ignored
  std::optional<uint64_t> count = ParseLength(count_text);
  if (!count)
    return Framing(absl::StrCat("invalid multibulk length '", Printable(count_text), "'"));
  if (*count > limits_.max_arguments) {
    return Framing(
        absl::StrCat("a command of ", *count, " arguments, over ", limits_.max_arguments));
  }
  expected_ = *count;
  state_ = State::kArgumentHeader;
  return absl::OkStatus();
}

absl::Status Parser::StartArgument(absl::string_view line) {
  if (line.empty() || line[0] != '$') {
    return Framing(absl::StrCat("expected '$' before an argument, got '", Printable(line), "'"));
  }
  std::optional<uint64_t> length = ParseLength(line.substr(1));
  if (!length) {
    return Framing(absl::StrCat("invalid bulk length '", Printable(line.substr(1)), "'"));
  }
  if (*length > kMaxBulkBytes) {
    return Framing(absl::StrCat("a bulk length of ", *length, " bytes, over ", kMaxBulkBytes));
  }
  if (*length > limits_.max_argument_bytes) {
    command_.oversized_bytes = std::max(command_.oversized_bytes, *length);
    length_ = *length + 2;  // the CRLF after it too
    state_ = State::kSkip;
    return absl::OkStatus();
  }
  length_ = *length;
  state_ = State::kArgument;
  if (buffer_.capacity() < pos_ + length_ + 2) buffer_.reserve(pos_ + length_ + 2);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Command>> Parser::Next() {
  while (true) {
    Compact();
    switch (state_) {
      case State::kCommand:
      case State::kArgumentHeader: {
        absl::StatusOr<std::optional<absl::string_view>> line = Line();
        if (!line.ok()) return line.status();
        if (!*line) return std::nullopt;
        std::optional<Command> inline_command;
        absl::Status started = state_ == State::kCommand ? StartCommand(**line, &inline_command)
                                                         : StartArgument(**line);
        if (!started.ok()) return started;
        if (inline_command) return inline_command;
        break;
      }
      case State::kArgument: {
        if (buffer_.size() - pos_ < length_ + 2) return std::nullopt;
        if (buffer_.compare(pos_ + length_, 2, "\r\n") != 0) {
          return Framing(absl::StrCat("a bulk string of ", length_, " bytes not followed by CRLF"));
        }
        command_.args.emplace_back(buffer_, pos_, length_);
        args_bytes_ += length_;
        pos_ += length_ + 2;
        if (std::optional<Command> done = Finish()) return done;
        break;
      }
      case State::kSkip: {
        uint64_t take = std::min<uint64_t>(length_, buffer_.size() - pos_);
        pos_ += take;
        length_ -= take;
        if (length_ > 0) return std::nullopt;
        command_.args.emplace_back();
        if (std::optional<Command> done = Finish()) return done;
        break;
      }
    }
  }
}

std::optional<Command> Parser::Finish() {
  if (command_.args.size() < expected_) {
    state_ = State::kArgumentHeader;
    return std::nullopt;
  }
  state_ = State::kCommand;
  args_bytes_ = 0;
  return std::exchange(command_, Command{});
}

void Parser::Compact() {
  if (pos_ == buffer_.size()) {
    if (buffer_.capacity() > kKeepCapacity) {
      std::string().swap(buffer_);  // a large command's room is not kept while idle
    } else {
      buffer_.clear();
    }
    pos_ = 0;
  } else if (pos_ >= kCompactBytes) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
}

void AppendSimple(std::string& out, absl::string_view text) { AppendLine(out, '+', text); }
void AppendError(std::string& out, absl::string_view text) { AppendLine(out, '-', text); }

void AppendInteger(std::string& out, int64_t value) { absl::StrAppend(&out, ":", value, "\r\n"); }

void AppendBulk(std::string& out, absl::string_view bytes) {
  absl::StrAppend(&out, "$", bytes.size(), "\r\n");
  out.append(bytes.data(), bytes.size());
  out.append("\r\n");
}

void AppendNull(std::string& out, int protocol) { out.append(protocol >= 3 ? "_\r\n" : "$-1\r\n"); }

void AppendArrayHeader(std::string& out, size_t count) {
  absl::StrAppend(&out, "*", count, "\r\n");
}

void AppendMapHeader(std::string& out, size_t pairs, int protocol) {
  if (protocol >= 3) {
    absl::StrAppend(&out, "%", pairs, "\r\n");
  } else {
    AppendArrayHeader(out, 2 * pairs);
  }
}

}  // namespace kcache::resp
