// The small value types of kcache.h: names, parsing, look-ups.
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kcache/kcache.h"

namespace kcache::client {

std::string Device::ToString() const { return absl::StrCat(sm_major, ".", sm_minor); }

absl::StatusOr<Device> Device::Parse(absl::string_view sm, uint32_t driver_version) {
  absl::string_view text = absl::StripAsciiWhitespace(sm);
  absl::ConsumePrefix(&text, "sm_");
  int major = 0, minor = 0;
  bool ok = false;
  if (size_t dot = text.find('.'); dot != absl::string_view::npos) {
    ok = absl::SimpleAtoi(text.substr(0, dot), &major) &&
         absl::SimpleAtoi(text.substr(dot + 1), &minor) && text.size() - dot == 2;
  } else if (int arch = 0; text.size() >= 2 && absl::SimpleAtoi(text, &arch)) {
    major = arch / 10;
    minor = arch % 10;
    ok = true;
  }
  if (!ok || major < 1 || major > 99 || minor < 0 || minor > 9) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", sm, "' is not a device SM; write it as major.minor, e.g. 8.9 (or sm_89)"));
  }
  return Device{major, minor, driver_version};
}

absl::string_view ArtifactKindName(ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::kCubin:
      return "cubin";
    case ArtifactKind::kPtx:
      return "ptx";
    case ArtifactKind::kLtoir:
      return "ltoir";
  }
  return "unknown";
}

absl::string_view ServeRuleName(ServeRule rule) {
  switch (rule) {
    case ServeRule::kExactSass:
      return "exact_sass";
    case ServeRule::kCompatibleSass:
      return "compatible_sass";
    case ServeRule::kPtxJit:
      return "ptx_jit";
    case ServeRule::kCompiled:
      return "compiled";
  }
  return "unknown";
}

absl::string_view ServedFromName(ServedFrom from) {
  switch (from) {
    case ServedFrom::kDaemonMemory:
      return "daemon:memory";
    case ServedFrom::kDaemonLocalStore:
      return "daemon:local_store";
    case ServedFrom::kDaemonBakedStore:
      return "daemon:baked_store";
    case ServedFrom::kDaemonCompile:
      return "daemon:compile";
    case ServedFrom::kLocalCompile:
      return "local_compile";
    case ServedFrom::kDaemonUnknownTier:
      return "daemon";
  }
  return "unknown";
}

absl::string_view BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

std::string FetchedKernel::LoweredName(absl::string_view name_expression) const {
  for (const auto& [expr, lowered] : lowered_names) {
    if (expr == name_expression) return lowered;
  }
  return "";
}

uint64_t DaemonStats::Counter(absl::string_view name) const {
  for (const DaemonCounter& c : counters) {
    if (c.name == name) return c.value;
  }
  return 0;
}

}  // namespace kcache::client
