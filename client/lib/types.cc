// The small value types of kcache.h: names, parsing, look-ups.
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/artifact.h"
#include "core/compat.h"
#include "core/target.h"
#include "kcache/kcache.h"

namespace kcache::client {

std::string Device::ToString() const { return absl::StrCat(sm_major, ".", sm_minor); }

absl::StatusOr<Device> Device::Parse(absl::string_view sm, uint32_t driver_version) {
  absl::StatusOr<Sm> parsed = ParseSm(absl::StripAsciiWhitespace(sm));
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", sm, "' is not a device SM; write it as major.minor, e.g. 8.9 (or sm_89)"));
  }
  return Device{parsed->major, parsed->minor, driver_version};
}

// The public enums carry the wire numbers of core's, so core names them.
static_assert(
    static_cast<int>(ArtifactKind::kCubin) == static_cast<int>(kcache::ArtifactKind::kCubin) &&
    static_cast<int>(ArtifactKind::kPtx) == static_cast<int>(kcache::ArtifactKind::kPtx) &&
    static_cast<int>(ArtifactKind::kLtoir) == static_cast<int>(kcache::ArtifactKind::kLtoir));
static_assert(
    static_cast<int>(ServeRule::kExactSass) == static_cast<int>(kcache::ServeRule::kExactSass) &&
    static_cast<int>(ServeRule::kCompatibleSass) ==
        static_cast<int>(kcache::ServeRule::kCompatibleSass) &&
    static_cast<int>(ServeRule::kPtxJit) == static_cast<int>(kcache::ServeRule::kPtxJit) &&
    static_cast<int>(ServeRule::kCompiled) == static_cast<int>(kcache::ServeRule::kCompiled));

absl::string_view ArtifactKindName(ArtifactKind kind) {
  return kcache::ArtifactKindName(static_cast<kcache::ArtifactKind>(kind));
}

absl::string_view ServeRuleName(ServeRule rule) {
  return kcache::ServeRuleName(static_cast<kcache::ServeRule>(rule));
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
    case ServedFrom::kDaemonShared:
      return "daemon:shared";
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
