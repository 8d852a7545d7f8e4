#include "core/target.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kcache {
namespace {

constexpr char kTargetHelp[] = "write a target as 8.6, sm_86, 9.0a, 10.0f or compute_86";

// Parses "86", "90a", "100f" (the part after sm_ / compute_). Returns false on anything else.
bool ParseArchDigits(absl::string_view text, Sm* sm, ArchVariant* variant) {
  *variant = ArchVariant::kNone;
  if (!text.empty() && (text.back() == 'a' || text.back() == 'f')) {
    *variant = text.back() == 'a' ? ArchVariant::kArchSpecific : ArchVariant::kFamily;
    text.remove_suffix(1);
  }
  if (text.size() < 2 || text.size() > 3) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  int arch = 0;
  if (!absl::SimpleAtoi(text, &arch) || text.front() == '0') return false;
  *sm = SmFromArch(arch);
  return true;
}

// Parses "8.6", "9.0a", "10.0f" (dotted form). Returns false on anything else.
bool ParseDotted(absl::string_view text, Sm* sm, ArchVariant* variant) {
  *variant = ArchVariant::kNone;
  if (!text.empty() && (text.back() == 'a' || text.back() == 'f')) {
    *variant = text.back() == 'a' ? ArchVariant::kArchSpecific : ArchVariant::kFamily;
    text.remove_suffix(1);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  if (parts.size() != 2 || parts[0].empty() || parts[0].size() > 2 || parts[1].size() != 1) {
    return false;
  }
  for (absl::string_view part : parts) {
    for (char c : part) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
    }
  }
  int major = 0, minor = 0;
  if (!absl::SimpleAtoi(parts[0], &major) || !absl::SimpleAtoi(parts[1], &minor)) return false;
  if (major == 0) return false;
  *sm = Sm{major, minor};
  return true;
}

std::string ArchListForHumans(const std::vector<int>& archs) {
  std::vector<std::string> out;
  out.reserve(archs.size());
  for (int arch : archs) out.push_back(SmFromArch(arch).ToString());
  return absl::StrJoin(out, " ");
}

}  // namespace

std::string Sm::ToString() const { return absl::StrCat(major, ".", minor); }

Sm SmFromArch(int arch) { return Sm{arch / 10, arch % 10}; }

absl::Status ValidateDeviceSm(int64_t major, int64_t minor) {
  if (major >= 1 && major <= kMaxSmMajor && minor >= 0 && minor <= 9) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("device SM ", major, ".", minor,
                                                 " is not a compute capability; major is 1..",
                                                 kMaxSmMajor, " and minor 0..9, e.g. 8.9"));
}

absl::Status ValidateArchBound(int64_t arch, absl::string_view field) {
  if (arch == 0 || (arch >= 10 && arch <= kMaxSmMajor * 10 + 9)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", arch,
                   " is not an architecture; write major*10+minor, e.g. 75 for 7.5 or 121 for "
                   "12.1 (0 = no bound)"));
}

absl::Status ValidateArchRange(int64_t min_arch, int64_t max_arch, absl::string_view field) {
  if (absl::Status s = ValidateArchBound(min_arch, absl::StrCat(field, ".min_arch")); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateArchBound(max_arch, absl::StrCat(field, ".max_arch")); !s.ok()) {
    return s;
  }
  if (min_arch != 0 && max_arch != 0 && min_arch > max_arch) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": min_arch ", min_arch,
                                                   " is above max_arch ", max_arch,
                                                   "; send a range that holds an SM"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Sm> ParseSm(absl::string_view text) {
  Sm sm;
  ArchVariant variant;
  absl::string_view rest = text;
  bool ok = absl::ConsumePrefix(&rest, "sm_")           ? ParseArchDigits(rest, &sm, &variant)
            : rest.find('.') != absl::string_view::npos ? ParseDotted(rest, &sm, &variant)
                                                        : ParseArchDigits(rest, &sm, &variant);
  if (!ok || variant != ArchVariant::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device architecture '", text, "' is not valid; write it as major.minor, e.g. 8.9"));
  }
  if (absl::Status s = ValidateDeviceSm(sm.major, sm.minor); !s.ok()) return s;
  return sm;
}

std::string Target::ToString() const {
  absl::string_view suffix = variant == ArchVariant::kArchSpecific ? "a"
                             : variant == ArchVariant::kFamily     ? "f"
                                                                   : "";
  return absl::StrCat(kind == TargetKind::kSass ? "sm_" : "compute_", sm.arch(), suffix);
}

absl::StatusOr<Target> ParseTarget(absl::string_view text) {
  Target target;
  absl::string_view rest = text;
  bool ok;
  if (absl::ConsumePrefix(&rest, "sm_")) {
    ok = ParseArchDigits(rest, &target.sm, &target.variant);
  } else if (absl::ConsumePrefix(&rest, "compute_")) {
    target.kind = TargetKind::kPtx;
    ok = ParseArchDigits(rest, &target.sm, &target.variant);
  } else {
    ok = ParseDotted(rest, &target.sm, &target.variant);
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("target '", text, "' is not valid; ", kTargetHelp));
  }
  return target;
}

absl::StatusOr<std::vector<Target>> ParseTargetList(absl::string_view text) {
  std::vector<Target> targets;
  std::set<Target> seen;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("target list '", text, "' has an empty item; ", "write e.g. 7.5,8.6,8.9"));
    }
    absl::StatusOr<Target> target = ParseTarget(item);
    if (!target.ok()) return target.status();
    if (!seen.insert(*target).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("target list '", text, "' names ", target->ToString(), " twice"));
    }
    targets.push_back(*target);
  }
  return targets;
}

absl::Status ValidateTarget(const Target& target, const std::vector<int>& supported_archs,
                            absl::string_view toolkit_name) {
  int arch = target.sm.arch();
  if (std::find(supported_archs.begin(), supported_archs.end(), arch) == supported_archs.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target ", target.ToString(), " (", target.sm.ToString(), ") is not supported by ",
        toolkit_name, "; supported: ", ArchListForHumans(supported_archs)));
  }
  if (target.variant == ArchVariant::kArchSpecific && arch < 90) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target ", target.ToString(), " does not exist: arch-specific ('a') targets start at 9.0"));
  }
  if (target.variant == ArchVariant::kFamily && arch < 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target ", target.ToString(), " does not exist: family ('f') targets start at 10.0"));
  }
  return absl::OkStatus();
}

}  // namespace kcache
