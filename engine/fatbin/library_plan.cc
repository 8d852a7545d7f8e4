// PlanLibrary (library_plan.h): the serving rules' compatibility applied to a library's entries.
#include "engine/fatbin/library_plan.h"

#include "absl/strings/str_cat.h"
#include "core/compat.h"

namespace kcache::fatbin {
namespace {

bool SassRunsOn(const Target& sass, Sm device) {
  std::optional<ServeRule> rule = CompatibilityOf(sass, device);
  return rule == ServeRule::kExactSass || rule == ServeRule::kCompatibleSass;
}

TargetPlan PlanTarget(const Library& library, const Target& target) {
  TargetPlan plan;
  plan.target = target;
  const std::vector<FatbinEntry>& entries = library.entries();
  std::vector<Target> ptx_targets;
  std::vector<size_t> ptx_index;
  bool relocatable_fits = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    const FatbinEntry& e = entries[i];
    if (e.kind != EntryKind::kSass && e.kind != EntryKind::kPtx) continue;
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
  if (best.has_value()) {
    plan.decision = TargetPlan::Decision::kBuild;
    plan.ptx_entry = ptx_index[*best];
    const Target& ptx = ptx_targets[*best];
    plan.build = Target{
        TargetKind::kSass, target.sm,
        ptx.variant == ArchVariant::kArchSpecific ? ArchVariant::kArchSpecific : target.variant};
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

std::vector<TargetPlan> PlanLibrary(const Library& library, const std::vector<Target>& targets) {
  std::vector<TargetPlan> plans;
  plans.reserve(targets.size());
  for (const Target& t : targets) plans.push_back(PlanTarget(library, t));
  return plans;
}

}  // namespace kcache::fatbin
