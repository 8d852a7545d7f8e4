// RESP framing: every command shape the Redis door reads, split anywhere; binary arguments;
// the lengths and frames that cannot be trusted; the replies' two protocol versions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/resp/resp.h"

namespace kcache::resp {
namespace {

using Args = std::vector<std::string>;

std::string Frame(const Args& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& arg : args) {
    out += "$" + std::to_string(arg.size()) + "\r\n" + arg + "\r\n";
  }
  return out;
}

// Every command `bytes` holds, fed `step` bytes at a time; fails the test on an error.
std::vector<Command> ParseAll(const std::string& bytes, size_t step, ParserLimits limits = {}) {
  Parser parser(limits);
  std::vector<Command> commands;
  for (size_t at = 0; at < bytes.size(); at += step) {
    parser.Feed(absl::string_view(bytes).substr(at, step));
    while (true) {
      absl::StatusOr<std::optional<Command>> next = parser.Next();
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok() || !*next) break;
      commands.push_back(**next);
    }
  }
  EXPECT_EQ(parser.buffered(), 0u);
  return commands;
}

absl::Status FirstError(const std::string& bytes, ParserLimits limits = {}) {
  Parser parser(limits);
  parser.Feed(bytes);
  while (true) {
    absl::StatusOr<std::optional<Command>> next = parser.Next();
    if (!next.ok()) return next.status();
    if (!*next) return absl::OkStatus();
  }
}

TEST(RespParserTest, ReadsEveryCommandShapeWholeAndSplitAtEveryByte) {
  std::string binary("k\0\r\n\xff:v", 7);
  std::vector<Args> shapes = {
      {"PING"},
      {"GET", "pt2:a"},
      {"SET", "pt2:a", binary, "EX", "60", "NX"},
      {"MGET", "triton:a", "triton:b", "triton:c"},
      {"HELLO", "3"},
      {"CLIENT", "SETINFO", "lib-name", "redis-py"},
      {"SET", "pt2:empty", ""},
  };
  std::string stream;
  for (const Args& args : shapes) stream += Frame(args);
  for (size_t step : {stream.size(), size_t{1}, size_t{2}, size_t{7}}) {
    std::vector<Command> commands = ParseAll(stream, step);
    ASSERT_EQ(commands.size(), shapes.size()) << "step " << step;
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(commands[i].args, shapes[i]) << "step " << step;
      EXPECT_EQ(commands[i].oversized_bytes, 0u);
    }
  }
}

TEST(RespParserTest, ReadsInlineCommandsAndSkipsEmptyArrays) {
  std::vector<Command> commands = ParseAll("PING\r\n\r\n*0\r\nget  pt2:x\r\n*-1\r\n", 1);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].args, Args{"PING"});
  EXPECT_EQ(commands[1].args, (Args{"get", "pt2:x"}));
}

TEST(RespParserTest, ReadsPastAnOversizedArgumentAndKeepsTheStreamFramed) {
  ParserLimits limits;
  limits.max_argument_bytes = 8;
  std::string stream = Frame({"SET", "pt2:k", std::string(100, 'x')}) + Frame({"GET", "pt2:k"});
  for (size_t step : {stream.size(), size_t{1}, size_t{3}}) {
    std::vector<Command> commands = ParseAll(stream, step, limits);
    ASSERT_EQ(commands.size(), 2u);
    EXPECT_EQ(commands[0].oversized_bytes, 100u);
    EXPECT_EQ(commands[0].args, (Args{"SET", "pt2:k", ""}));
    EXPECT_EQ(commands[1].args, (Args{"GET", "pt2:k"}));
    EXPECT_EQ(commands[1].oversized_bytes, 0u);
  }
}

TEST(RespParserTest, OversizedArgumentsAreNotBuffered) {
  ParserLimits limits;
  limits.max_argument_bytes = 8;
  Parser parser(limits);
  parser.Feed("*2\r\n$3\r\nSET\r\n$1000000\r\n" + std::string(500000, 'x'));
  absl::StatusOr<std::optional<Command>> next = parser.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(*next);
  EXPECT_LT(parser.buffered(), 100u);
}

TEST(RespParserTest, RefusesWhatCannotBeFramed) {
  struct Case {
    std::string bytes, says;
  };
  ParserLimits limits;
  limits.max_arguments = 4;
  limits.max_inline_bytes = 100;
  const Case cases[] = {
      {"*1\r\n$99999999999999999999\r\n", "invalid bulk length"},
      {"*1\r\n$1000000000000\r\n", "over"},
      {"*1\r\n$-5\r\n", "invalid bulk length"},
      {"*1\r\n$abc\r\n", "invalid bulk length"},
      {"*1\r\n:3\r\n", "expected '$'"},
      {"*x\r\n", "invalid multibulk length"},
      {"*99999999999999999999\r\n", "invalid multibulk length"},
      {"*5\r\n", "5 arguments"},
      {"*1\r\n$3\r\nGETxx", "not followed by CRLF"},
      {std::string(200, 'A'), "without CRLF"},
      {std::string(200, 'A') + "\r\n", "over 100"},
  };
  for (const Case& c : cases) {
    absl::Status error = FirstError(c.bytes, limits);
    EXPECT_TRUE(absl::IsInvalidArgument(error)) << c.bytes.substr(0, 40) << ": " << error;
    EXPECT_NE(error.message().find(c.says), std::string::npos) << error;
  }
}

TEST(RespParserTest, AnUnterminatedFrameWaitsForMore) {
  EXPECT_TRUE(FirstError("*2\r\n$3\r\nGET\r\n$5\r\npt2").ok());
  EXPECT_TRUE(FirstError("*2\r\n$3\r\nGET").ok());
}

TEST(RespWriterTest, WritesBothProtocolVersions) {
  std::string out;
  AppendNull(out, 2);
  AppendNull(out, 3);
  AppendMapHeader(out, 2, 2);
  AppendMapHeader(out, 2, 3);
  AppendBulk(out, std::string("a\0b", 3));
  AppendInteger(out, -7);
  AppendError(out, "ERR bad\r\nthing");
  AppendSimple(out, "OK");
  const char kWant[] = "$-1\r\n_\r\n*4\r\n%2\r\n$3\r\na\0b\r\n:-7\r\n-ERR bad  thing\r\n+OK\r\n";
  EXPECT_EQ(out, std::string(kWant, sizeof(kWant) - 1));
}

}  // namespace
}  // namespace kcache::resp
