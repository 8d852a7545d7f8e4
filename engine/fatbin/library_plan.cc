// PlanLibrary (library_plan.h): the serving rules' compatibility applied to a library's entries.
#include "engine/fatbin/library_plan.h"

#include <optional>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/compat.h"

namespace kcache::fatbin {
namespace {

bool SassRunsOn(const Target& sass, Sm device) {
  std::optional<ServeRule> rule = CompatibilityOf(sass, device);
  return rule == ServeRule::kExactSass || rule == ServeRule::kCompatibleSass;
}

// Whether `e` is code a module load can run: SASS or PTX, not relocatable.
bool Loadable(const FatbinEntry& e) {
  return (e.kind == EntryKind::kSass || e.kind == EntryKind::kPtx) && !e.relocatable;
}

// The plan for `target` of the entries of fatbin `fatbin` (every entry when nullopt).
TargetPlan PlanTarget(const Library& library, const Target& target, std::optional<size_t> fatbin) {
  TargetPlan plan;
  plan.target = target;
  plan.fatbin = fatbin.value_or(0);
  const std::vector<FatbinEntry>& entries = library.entries();
  std::vector<Target> ptx_targets;
  std::vector<size_t> ptx_index;
  bool relocatable_fits = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    const FatbinEntry& e = entries[i];
    if (e.kind != EntryKind::kSass && e.kind != EntryKind::kPtx) continue;
    if (fatbin.has_value() && e.fatbin != *fatbin) continue;
    if (e.relocatable) {
      relocatable_fits = relocatable_fits || CompatibilityOf(e.target(), target.sm).has_value();
      continue;
    }
    if (e.kind == EntryKind::kSass && SassRunsOn(e.target(), target.sm)) {
      plan.decision = TargetPlan::Decision::kHasSass;
      plan.sass_entry = i;
      return plan;
    }
    if (e.kind == EntryKind::kPtx) {
      ptx_targets.push_back(e.target());
      ptx_index.push_back(i);
    }
  }
  std::optional<size_t> best = PickBest(ptx_targets, target.sm);
  if (best.has_value() && !entries[ptx_index[*best]].jit_options.empty()) {
    // The driver JITs that PTX with these options; kcache builds with its own alone, so what it
    // built would not be what the driver makes.
    plan.note = absl::StrCat("the PTX the driver would JIT there (",
                             entries[ptx_index[*best]].Describe(), ") carries JIT options (\"",
                             absl::CHexEscape(entries[ptx_index[*best]].jit_options.substr(0, 80)),
                             "\") that kcache does not build with: left to the driver");
    return plan;
  }
  if (best.has_value()) {
    plan.decision = TargetPlan::Decision::kBuild;
    plan.ptx_entry = ptx_index[*best];
    plan.build = *SassTargetFor(ptx_targets[*best], target);  // PickBest chose it: it runs there
    return plan;
  }
  if (relocatable_fits) {
    plan.note = "only relocatable device code (__nv_relfatbin) fits; it needs a device link";
  } else if (!ptx_targets.empty()) {
    plan.note = absl::StrCat("no SASS runs on ", target.sm.ToString(),
                             " and every PTX is for a higher or another arch");
  } else {
    plan.note = absl::StrCat("no SASS runs on ", target.sm.ToString(), " and there is no PTX");
  }
  return plan;
}

}  // namespace

std::optional<Target> SassTargetFor(const Target& ptx, const Target& target) {
  if (!PickBest({ptx}, target.sm).has_value()) return std::nullopt;
  return Target{
      TargetKind::kSass, target.sm,
      ptx.variant == ArchVariant::kArchSpecific ? ArchVariant::kArchSpecific : target.variant};
}

std::vector<TargetPlan> PlanLibrary(const Library& library, const std::vector<Target>& targets) {
  std::set<size_t> fatbins;
  for (const FatbinEntry& e : library.entries()) {
    if (Loadable(e)) fatbins.insert(e.fatbin);
  }
  std::vector<TargetPlan> plans;
  for (const Target& t : targets) {
    if (fatbins.empty()) plans.push_back(PlanTarget(library, t, std::nullopt));  // says why
    for (size_t fatbin : fatbins) plans.push_back(PlanTarget(library, t, fatbin));
  }
  return plans;
}

}  // namespace kcache::fatbin
