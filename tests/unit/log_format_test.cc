// FormatLogLine (daemon/host/log_format.h): one line per event in both formats.
#include "daemon/host/log_format.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kcache {
namespace {

const absl::Time kTime = absl::FromUnixMillis(1795326138473);  // 2026-11-22T05:42:18.473Z

TEST(LogFormatTest, TextIsOneLineWithUtcTimeAndLevel) {
  std::string line = FormatLogLine(LogFormat::kText, kTime, "warn",
                                   "compile failed:\nline 2\r\n\tand a \x01 byte");
  EXPECT_EQ(line, "2026-11-22T05:42:18.473Z warn compile failed:\\nline 2\\r\\n\tand a \\x01 byte");
}

TEST(LogFormatTest, JsonIsOneParsableObject) {
  std::string message = "path \"/a\\b\"\nnext line\x02";
  std::string line = FormatLogLine(LogFormat::kJson, kTime, "error", message);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  nlohmann::json parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["time"], "2026-11-22T05:42:18.473Z");
  EXPECT_EQ(parsed["level"], "error");
  EXPECT_EQ(parsed["msg"], message);
}

TEST(LogFormatTest, ParseNamesBothFormats) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  absl::StatusOr<LogFormat> bad = ParseLogFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("text or json"), absl::string_view::npos);
}

}  // namespace
}  // namespace kcache
