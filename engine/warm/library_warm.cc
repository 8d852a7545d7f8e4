// WarmLibrary (library_warm.h): a library's PTX compiled to SASS (CompileJob::ptx) into a store.
#include "engine/warm/library_warm.h"

#include "absl/strings/str_cat.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/store/store.h"

namespace kcache {

using fatbin::EntryPayload;
using fatbin::FatbinEntry;
using fatbin::PlanLibrary;
using fatbin::PtxModuleId;
using fatbin::PtxSassCompileOptions;
using fatbin::PtxTextTarget;
using fatbin::TargetPlan;

absl::StatusOr<LibraryWarmResult> WarmLibrary(const fatbin::Library& library,
                                              const std::vector<Target>& targets, Store& store,
                                              Compiler& compiler, LibraryWarmObserver* observer) {
  LibraryWarmResult result;
  result.plan = PlanLibrary(library, targets);
  const std::string& toolkit_id = compiler.toolkit().identity().id;
  for (const TargetPlan& plan : result.plan) {
    if (plan.decision != TargetPlan::Decision::kBuild) continue;
    const FatbinEntry& entry = library.entries()[*plan.ptx_entry];
    absl::StatusOr<std::string> ptx = EntryPayload(entry, library.path());
    if (!ptx.ok()) return ptx.status();
    // An empty (or not PTX) entry is said so, before a compile job, which tells a PTX job by
    // its PTX, would take it for a source and refuse its options.
    if (absl::StatusOr<Target> text = PtxTextTarget(*ptx); !text.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(library.path(), ": ", entry.Describe(),
                                                     " is not PTX: ", text.status().message()));
    }
    CompileJob job;
    job.id = PtxModuleId(*ptx, entry.jit_options, PtxSassCompileOptions());
    job.target = plan.build;
    job.spec.name = library.path();
    job.spec.options = PtxSassCompileOptions();
    job.ptx = *std::move(ptx);
    ArtifactKey key = job.ExpectedKeys(toolkit_id).front();
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
      absl::StatusOr<CompileOutput> output = compiler.Compile(job);
      if (!output.ok()) {
        return absl::Status(output.status().code(),
                            absl::StrCat(library.path(), ": ", entry.Describe(), " -> ",
                                         plan.build.ToString(), ": ", output.status().message()));
      }
      const Artifact& cubin = output->artifacts.front();
      built.micros = cubin.meta.compile_micros;
      built.bytes = cubin.bytes.size();
      if (absl::Status put = store.Put(cubin); !put.ok()) return put;
    }
    if (observer != nullptr) observer->OnBuilt(built);
    result.built.push_back(std::move(built));
  }
  return result;
}

}  // namespace kcache
