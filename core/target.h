// Targets (what code is built for) and device architectures (what code runs on).
#ifndef KCACHE_CORE_TARGET_H_
#define KCACHE_CORE_TARGET_H_

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache {

// SASS (a cubin, "sm_86") or PTX ("compute_86").
enum class TargetKind : uint8_t { kSass = 0, kPtx = 1 };

// "" plain, "a" arch-specific (runs only on exactly that SM), "f" family-specific
// (runs on that SM and later minors of the same major).
enum class ArchVariant : uint8_t { kNone = 0, kArchSpecific = 1, kFamily = 2 };

// A compute capability, e.g. {8, 9}. arch() is the NVRTC number: 89, 100, 121.
struct Sm {
  int major = 0;
  int minor = 0;
  int arch() const { return major * 10 + minor; }
  std::string ToString() const;  // "8.9"
  auto operator<=>(const Sm&) const = default;
};

// The compute capabilities kcache accepts, for a device or a kernel's arch bound: major
// 1..kMaxSmMajor, minor 0..9. The one bound every caller checks against (the daemon's front
// end, the artifact cache, the kcache tool, libkcache).
inline constexpr int kMaxSmMajor = 30;

// OK for a compute capability within those bounds; InvalidArgument otherwise, naming the SM
// and the bounds, e.g. "device SM 0.0 is not a compute capability; major is 1..30 and minor
// 0..9, e.g. 8.9".
absl::Status ValidateDeviceSm(int64_t major, int64_t minor);

// OK for a kernel's arch bound: 0 (no bound) or major*10+minor within the bounds above.
// InvalidArgument naming `field` otherwise.
absl::Status ValidateArchBound(int64_t arch, absl::string_view field);

// OK when both bounds pass ValidateArchBound and min <= max (0 = no bound); InvalidArgument
// naming `field` otherwise.
absl::Status ValidateArchRange(int64_t min_arch, int64_t max_arch, absl::string_view field);

// Parses a device SM: "8.9", "12.1", "sm_89", "89". Variants are not allowed for devices, and
// the SM must pass ValidateDeviceSm.
absl::StatusOr<Sm> ParseSm(absl::string_view text);
// Sm from an NVRTC arch number: 89 -> 8.9, 121 -> 12.1.
Sm SmFromArch(int arch);

struct Target {
  TargetKind kind = TargetKind::kSass;
  Sm sm;
  ArchVariant variant = ArchVariant::kNone;

  // "sm_90a", "compute_86", "sm_100f": the canonical spelling, used in keys and in -arch.
  std::string ToString() const;
  // The same target with another kind (sm_86 -> compute_86), keeping the variant.
  Target WithKind(TargetKind k) const { return Target{k, sm, variant}; }
  auto operator<=>(const Target&) const = default;
};

// Parses a target as written on the command line or in a store:
//   "7.5" / "sm_75" -> sm_75;  "9.0a" / "sm_90a" -> sm_90a;  "10.0f" -> sm_100f;
//   "compute_90" -> compute_90 (PTX).
// Syntax only: whether a toolkit supports it is ValidateTarget's job.
absl::StatusOr<Target> ParseTarget(absl::string_view text);

// Parses a comma-separated list ("7.5,8.6,8.9"), rejecting duplicates and empty items.
absl::StatusOr<std::vector<Target>> ParseTargetList(absl::string_view text);

// OK if `supported_archs` (nvrtcGetSupportedArchs, e.g. {75,80,...,121}) holds the target's
// arch and the variant exists for it (a: 90 and later; f: 100 and later). Otherwise
// InvalidArgument naming the target, the toolkit and the supported list, e.g.
// "target sm_70 is not supported by NVRTC 13.0; supported: 7.5 8.0 8.6 ...".
absl::Status ValidateTarget(const Target& target, const std::vector<int>& supported_archs,
                            absl::string_view toolkit_name);

}  // namespace kcache

#endif  // KCACHE_CORE_TARGET_H_
