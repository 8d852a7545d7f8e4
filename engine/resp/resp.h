// RESP, the Redis serialization protocol (versions 2 and 3), as far as kcached's Redis door
// needs it (docs/torch-compile.md): an incremental parser of the commands a client sends
// (arrays of bulk strings, and inline commands typed by hand) and writers of the replies.
// Pure: no I/O, no threads.
#ifndef KCACHE_ENGINE_RESP_RESP_H_
#define KCACHE_ENGINE_RESP_RESP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache::resp {

// A bulk string may announce at most this many bytes; more is a framing error (Redis's own
// proto-max-bulk-len).
inline constexpr uint64_t kMaxBulkBytes = uint64_t{512} << 20;

struct ParserLimits {
  // A bulk string longer than this (and at most kMaxBulkBytes) is read past, not kept: its
  // command comes back with `oversized_bytes` set, to be refused, and the stream stays framed.
  uint64_t max_argument_bytes = uint64_t{32} << 20;
  size_t max_arguments = 1 << 16;      // per command; more is a framing error
  size_t max_inline_bytes = 64 << 10;  // an inline command's (or a header's) line
};

struct Command {
  std::vector<std::string> args;  // the command's name first; never empty
  // The length of an argument over max_argument_bytes that was skipped (its place in `args`
  // holds ""), 0 when none was.
  uint64_t oversized_bytes = 0;
};

// Thread-compatible. Feed bytes as they arrive, then take commands with Next until it answers
// nullopt. After an error the stream cannot be framed any more: answer the error, close.
class Parser {
 public:
  explicit Parser(ParserLimits limits) : limits_(limits) {}

  void Feed(absl::string_view bytes) { buffer_.append(bytes.data(), bytes.size()); }

  // The next complete command, nullopt when more bytes are needed. InvalidArgument naming
  // what was wrong (a bad or huge length, a missing CRLF, too many arguments, a line too long).
  absl::StatusOr<std::optional<Command>> Next();

  // Bytes held for commands not yet complete (for the connection's buffer bound).
  size_t buffered() const { return buffer_.size() - pos_ + args_bytes_; }

 private:
  enum class State { kCommand, kArgumentHeader, kArgument, kSkip };

  // A line ending in CRLF at pos_, without it; nullopt when incomplete. Error when longer than
  // the inline limit.
  absl::StatusOr<std::optional<absl::string_view>> Line();
  absl::Status StartCommand(absl::string_view line, std::optional<Command>* inline_command);
  absl::Status StartArgument(absl::string_view line);
  // Moves the parsed prefix out of the buffer once it is large.
  void Compact();
  std::optional<Command> Finish();

  const ParserLimits limits_;
  std::string buffer_;
  size_t pos_ = 0;  // parsed up to here
  State state_ = State::kCommand;
  size_t expected_ = 0;    // arguments the command's array announced
  uint64_t length_ = 0;    // the argument's length (kArgument) or bytes left to skip (kSkip)
  Command command_;        // being parsed
  size_t args_bytes_ = 0;  // bytes of command_.args
};

// Replies. `protocol` is 2 or 3 (HELLO), where the two differ.
void AppendSimple(std::string& out, absl::string_view text);  // +OK: CR and LF become spaces
void AppendError(std::string& out, absl::string_view text);   // -ERR ...: likewise
void AppendInteger(std::string& out, int64_t value);
void AppendBulk(std::string& out, absl::string_view bytes);
void AppendNull(std::string& out, int protocol);  // $-1 (RESP2) or _ (RESP3)
void AppendArrayHeader(std::string& out, size_t count);
// RESP3: a map of `pairs` pairs; RESP2: an array of 2 * `pairs` items.
void AppendMapHeader(std::string& out, size_t pairs, int protocol);

}  // namespace kcache::resp

#endif  // KCACHE_ENGINE_RESP_RESP_H_
