// Fuzzes the Redis door's RESP framing (engine/resp/resp.h) with what a hostile client sends:
// the first byte sets the chunk size the bytes are fed in. Parsing never depends on how the
// bytes were split (whole and chunked give the same commands and the same first error); an
// error is InvalidArgument "Protocol error: ..."; a command is never empty and no argument
// exceeds the limit (an oversized one is an empty placeholder, its length reported); what was
// parsed, framed again, parses to the same commands; the bytes held never exceed those fed.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "engine/resp/resp.h"
#include "tests/fuzz/fuzz_check.h"

namespace kcache::resp {
namespace {

struct Outcome {
  std::vector<Command> commands;
  std::optional<absl::Status> error;
};

constexpr ParserLimits kLimits{/*max_argument_bytes=*/64, /*max_arguments=*/16,
                               /*max_inline_bytes=*/256};

Outcome Parse(const std::string& bytes, size_t chunk) {
  Parser parser(kLimits);
  Outcome outcome;
  for (size_t at = 0; at < bytes.size() && !outcome.error; at += chunk) {
    parser.Feed(absl::string_view(bytes).substr(at, chunk));
    FUZZ_CHECK(parser.buffered() <= bytes.size(), "holds more bytes than it was fed");
    while (true) {
      absl::StatusOr<std::optional<Command>> next = parser.Next();
      if (!next.ok()) {
        outcome.error = next.status();
        break;
      }
      if (!*next) break;
      outcome.commands.push_back(**next);
    }
  }
  return outcome;
}

std::string Frame(const Command& command) {
  std::string out = "*" + std::to_string(command.args.size()) + "\r\n";
  for (const std::string& arg : command.args) {
    out += "$" + std::to_string(arg.size()) + "\r\n" + arg + "\r\n";
  }
  return out;
}

bool Same(const std::vector<Command>& a, const std::vector<Command>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].args != b[i].args || a[i].oversized_bytes != b[i].oversized_bytes) return false;
  }
  return true;
}

}  // namespace
}  // namespace kcache::resp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kcache::resp;
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  Outcome whole = Parse(bytes, bytes.size() + 1);
  Outcome chunked = Parse(bytes, chunk);
  FUZZ_CHECK(Same(whole.commands, chunked.commands), "commands depend on how bytes were split");
  FUZZ_CHECK(whole.error.has_value() == chunked.error.has_value(),
             "an error depends on how bytes were split");
  if (whole.error) {
    FUZZ_CHECK(absl::IsInvalidArgument(*whole.error), whole.error->ToString());
    FUZZ_CHECK(absl::StartsWith(whole.error->message(), "Protocol error: "),
               whole.error->ToString());
  }
  std::string framed;
  for (const Command& command : whole.commands) {
    FUZZ_CHECK(!command.args.empty(), "an empty command");
    for (const std::string& arg : command.args) {
      FUZZ_CHECK(arg.size() <= kLimits.max_argument_bytes, "an argument over the limit kept");
    }
    if (command.oversized_bytes == 0) framed += Frame(command);
  }
  Outcome again = Parse(framed, framed.size() + 1);
  std::vector<Command> kept;
  for (const Command& command : whole.commands) {
    if (command.oversized_bytes == 0) kept.push_back(command);
  }
  FUZZ_CHECK(!again.error && Same(again.commands, kept), "framed again, parses differently");
  return 0;
}
