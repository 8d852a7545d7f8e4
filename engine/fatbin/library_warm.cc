// PlanLibrary and WarmLibrary (library_warm.h): the serving rules applied to a library's
// entries, and nvJitLink compiles of its PTX into a store.
#include "engine/fatbin/library_warm.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/compat.h"
#include "core/cubin.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/store/store.h"

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

absl::StatusOr<LibraryWarmResult> WarmLibrary(const Library& library,
                                              const std::vector<Target>& targets, Store& store,
                                              const Toolkit& toolkit,
                                              LibraryWarmObserver* observer) {
  LibraryWarmResult result;
  result.plan = PlanLibrary(library, targets);
  const std::string& toolkit_id = toolkit.identity().id;
  for (const TargetPlan& plan : result.plan) {
    if (plan.decision != TargetPlan::Decision::kBuild) continue;
    const FatbinEntry& entry = library.entries()[*plan.ptx_entry];
    absl::StatusOr<std::string> ptx = EntryPayload(entry, library.path());
    if (!ptx.ok()) return ptx.status();
    ArtifactKey key = PtxSassKey(PtxModuleId(*ptx, entry.jit_options, PtxSassCompileOptions()),
                                 plan.build, toolkit_id);
    BuiltEntry built{library.path(), entry.target(), plan.build, key.ToString()};
    absl::StatusOr<std::vector<ArtifactMeta>> stored = store.ListArtifacts(key.kernel_id);
    if (!stored.ok()) return stored.status();
    for (const ArtifactMeta& m : *stored) {
      if (m.key == key) {
        built.cached = true;
        built.bytes = m.size;
      }
    }
    if (!built.cached) {
      auto start = std::chrono::steady_clock::now();
      std::string log;
      absl::StatusOr<std::string> cubin =
          LinkPtx(toolkit, *ptx, plan.build, PtxSassCompileOptions(), &log);
      if (!cubin.ok()) {
        return absl::Status(cubin.status().code(),
                            absl::StrCat(library.path(), ": ", entry.Describe(), " -> ",
                                         plan.build.ToString(), ": ", cubin.status().message()));
      }
      built.micros = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::steady_clock::now() - start)
                                               .count());
      absl::StatusOr<int> arch = CubinSmArch(*cubin);
      if (!arch.ok() || *arch != plan.build.sm.arch()) {
        return absl::InternalError(absl::StrCat(library.path(), ": nvJitLink built ",
                                                plan.build.ToString(), " from ", entry.Describe(),
                                                " but its output is not a cubin for that SM"));
      }
      built.bytes = cubin->size();
      absl::Status put = store.Put(PtxSassArtifact(
          key, {library.path(), entry.target()}, *std::move(cubin), std::move(log), built.micros,
          MinDriverFor(ArtifactKind::kCubin, toolkit.identity().major, toolkit.identity().minor)));
      if (!put.ok()) return put;
    }
    if (observer != nullptr) observer->OnBuilt(built);
    result.built.push_back(std::move(built));
  }
  return result;
}

}  // namespace kcache::fatbin
