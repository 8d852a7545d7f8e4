// The serving rules (docs/serving-rules.md): which target may run on which device, and
// how candidates rank. The full table these functions produce is pinned by
// tests/unit/compat_test.cc and written out in docs/serving-rules.md.
#include "core/compat.h"

#include "absl/strings/cord.h"

namespace kcache {
namespace {

constexpr MissReason kAllMissReasons[] = {
    MissReason::kUnknownKernel,   MissReason::kBelowMinArch,      MissReason::kAboveMaxArch,
    MissReason::kNoToolkit,       MissReason::kCompileNotAllowed, MissReason::kCompileError,
    MissReason::kNothingServable, MissReason::kDriverTooOld};

// SASS runs only within one major: exactly its own SM for `a`, its own SM and later minors
// for plain and `f` cubins. Never a newer major, never a lower minor than it was built for.
std::optional<ServeRule> SassRule(const Target& target, Sm device) {
  if (target.sm == device) return ServeRule::kExactSass;
  if (target.variant == ArchVariant::kArchSpecific) return std::nullopt;
  if (target.sm.major == device.major && target.sm.minor < device.minor) {
    return ServeRule::kCompatibleSass;
  }
  return std::nullopt;
}

// Plain PTX is JIT-compiled forward to any later architecture; `a` PTX only for its own SM;
// `f` PTX for its family (same major, same or later minor).
std::optional<ServeRule> PtxRule(const Target& target, Sm device) {
  bool fits = false;
  switch (target.variant) {
    case ArchVariant::kNone:
      fits = target.sm <= device;
      break;
    case ArchVariant::kArchSpecific:
      fits = target.sm == device;
      break;
    case ArchVariant::kFamily:
      fits = target.sm.major == device.major && target.sm.minor <= device.minor;
      break;
  }
  if (!fits) return std::nullopt;
  return ServeRule::kPtxJit;
}

// Tie-break within one rule and one SM: plain over f over a (a plain cubin is the most widely
// usable artifact, an `a` one the least).
int VariantRank(ArchVariant variant) {
  switch (variant) {
    case ArchVariant::kNone:
      return 0;
    case ArchVariant::kFamily:
      return 1;
    case ArchVariant::kArchSpecific:
      return 2;
  }
  return 3;
}

}  // namespace

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

std::optional<ServeRule> CompatibilityOf(const Target& target, Sm device) {
  switch (target.kind) {
    case TargetKind::kSass:
      return SassRule(target, device);
    case TargetKind::kPtx:
      return PtxRule(target, device);
  }
  return std::nullopt;
}

bool BetterFor(Sm device, const Target& a, const Target& b) {
  const std::optional<ServeRule> rule_a = CompatibilityOf(a, device);
  const std::optional<ServeRule> rule_b = CompatibilityOf(b, device);
  // Outside the contract (a target that does not fit), but keep the order strict and weak:
  // a fitting target beats one that does not fit.
  if (!rule_a.has_value() || !rule_b.has_value()) {
    return rule_a.has_value() && !rule_b.has_value();
  }
  if (*rule_a != *rule_b) return *rule_a < *rule_b;
  // Same rule. For exact SASS both SMs equal the device; for compatible SASS and PTX the
  // closer (higher) SM wins.
  if (a.sm != b.sm) return a.sm > b.sm;
  return VariantRank(a.variant) < VariantRank(b.variant);
}

std::optional<size_t> PickBest(const std::vector<Target>& candidates, Sm device) {
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!CompatibilityOf(candidates[i], device).has_value()) continue;
    if (!best.has_value() || BetterFor(device, candidates[i], candidates[*best])) best = i;
  }
  return best;
}

absl::string_view MissReasonName(MissReason reason) {
  switch (reason) {
    case MissReason::kUnknownKernel:
      return "unknown_kernel";
    case MissReason::kBelowMinArch:
      return "below_min_arch";
    case MissReason::kAboveMaxArch:
      return "above_max_arch";
    case MissReason::kNoToolkit:
      return "no_toolkit";
    case MissReason::kCompileNotAllowed:
      return "compile_not_allowed";
    case MissReason::kCompileError:
      return "compile_error";
    case MissReason::kNothingServable:
      return "nothing_servable";
    case MissReason::kDriverTooOld:
      return "driver_too_old";
  }
  return "unknown";
}

std::optional<MissReason> MissReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kMissReasonPayload);  // absl::optional here
  if (!payload) return std::nullopt;
  for (MissReason reason : kAllMissReasons) {
    if (*payload == MissReasonName(reason)) return reason;
  }
  return std::nullopt;
}

absl::Status WithMissReason(absl::Status status, MissReason reason) {
  if (!status.ok()) status.SetPayload(kMissReasonPayload, absl::Cord(MissReasonName(reason)));
  return status;
}

}  // namespace kcache
