#include "client/launch/unresponsive_mark.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/launch/launch_command.h"
#include "core/environment.h"
#include "core/file_io.h"

namespace kcache::launch {
namespace {

constexpr char kMagic[] = "kcached-unresponsive";
constexpr char kVersion[] = "v1";
// A mark file is one short line; anything longer is not one.
constexpr size_t kMaxMarkBytes = 4096;

}  // namespace

UnresponsiveMark::UnresponsiveMark(std::string state_dir, std::string server, absl::Duration lasts)
    : path_(state_dir.empty() || server.empty()
                ? ""
                : absl::StrCat(state_dir, "/", kUnresponsiveMarkFile)),
      server_(std::move(server)),
      lasts_(lasts) {}

UnresponsiveMark UnresponsiveMark::FromEnvironment(const std::string& server) {
  absl::Duration lasts = kDefaultUnresponsiveFor;
  std::string ms = EnvValue("KCACHE_UNRESPONSIVE_MS");
  int64_t value = 0;
  if (absl::SimpleAtoi(ms, &value) && value >= 0) {
    lasts = absl::Milliseconds(value);
  }
  return UnresponsiveMark(StateDir(), server, lasts);
}

UnresponsiveMark::Found UnresponsiveMark::Read() const {
  Found found;
  if (path_.empty()) return found;
  absl::StatusOr<std::string> text = ReadWholeFile(path_);
  if (!text.ok()) return found;  // none (or unreadable: as none, and never removed)
  found.ours = true;             // until it names another server
  std::vector<std::string> fields;
  if (text->size() <= kMaxMarkBytes) {
    fields = absl::StrSplit(absl::StripSuffix(*text, "\n"), absl::MaxSplits(' ', 3));
  }
  int64_t until_ms = 0;
  if (fields.size() != 4 || fields[0] != kMagic || fields[1] != kVersion ||
      !absl::SimpleAtoi(fields[2], &until_ms)) {
    return found;  // damaged
  }
  found.ours = fields[3] == server_;
  found.until = absl::FromUnixMillis(until_ms);
  return found;
}

void UnresponsiveMark::Write(absl::Time until) const {
  if (path_.empty()) return;
  // A state directory that cannot be written keeps no mark: each command then asks.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  (void)WriteFileAtomically(path_, absl::StrCat(kMagic, " ", kVersion, " ",
                                                absl::ToUnixMillis(until), " ", server_, "\n"));
}

std::optional<absl::Time> UnresponsiveMark::Check(absl::Duration asking) {
  Found found = Read();
  if (!found.ours) return std::nullopt;
  absl::Time now = absl::Now();
  // Honoured while it lasts; one that ends further away than a mark lasts was damaged or
  // written before the clock went back, and is as stale as an expired one.
  if (found.until.has_value() && *found.until > now && *found.until <= now + lasts_ + asking) {
    return found.until;
  }
  probing_ = true;
  Write(now + asking);
  return std::nullopt;
}

absl::Time UnresponsiveMark::Set() {
  absl::Time until = absl::Now() + lasts_;
  Write(until);
  return until;
}

void UnresponsiveMark::Clear() {
  if (!path_.empty()) unlink(path_.c_str());
}

std::string ClockTime(absl::Time time) {
  return absl::FormatTime("%H:%M:%E3S", time, absl::LocalTimeZone());
}

}  // namespace kcache::launch
