// WarmLibrary (library_warm.h): nvJitLink compiles of a library's PTX into a store.
#include "engine/fatbin/library_warm.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/cubin.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/store/store.h"

namespace kcache::fatbin {

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
