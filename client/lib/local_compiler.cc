// LocalCompiler: NVRTC in this process (kcache_compile's in-process compiler), loaded lazily.
#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/lib/convert.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "kcache/kcache.h"

namespace kcache::client {
namespace {

// The device's own SASS when the toolkit supports its SM, else PTX for the highest supported
// arch below it (the driver JITs it).
absl::StatusOr<Target> TargetFor(const Device& device, const Toolkit& toolkit) {
  const std::vector<int>& archs = toolkit.supported_archs();
  if (std::find(archs.begin(), archs.end(), device.arch()) != archs.end()) {
    return Target{TargetKind::kSass, Sm{device.sm_major, device.sm_minor}, ArchVariant::kNone};
  }
  int best = 0;
  for (int arch : archs) {
    if (arch <= device.arch()) best = std::max(best, arch);
  }
  if (best == 0) {
    return absl::NotFoundError(absl::StrCat("device ", device.ToString(), " is below every target ",
                                            toolkit.identity().DisplayName(),
                                            " supports; it cannot compile for this GPU"));
  }
  return Target{TargetKind::kPtx, SmFromArch(best), ArchVariant::kNone};
}

}  // namespace

struct LocalCompiler::Impl {
  std::string root;
  absl::Mutex mu;
  bool attempted ABSL_GUARDED_BY(mu) = false;
  absl::Status load_status ABSL_GUARDED_BY(mu);
  std::shared_ptr<const Toolkit> toolkit ABSL_GUARDED_BY(mu);
  std::shared_ptr<Compiler> compiler ABSL_GUARDED_BY(mu);

  // The compiler, loading the toolkit on the first call.
  absl::StatusOr<std::shared_ptr<Compiler>> Get() {
    absl::MutexLock lock(&mu);
    if (!attempted) {
      attempted = true;
      absl::StatusOr<std::shared_ptr<const Toolkit>> loaded =
          Toolkit::Load(root.empty() ? Toolkit::DefaultRoot() : root);
      if (loaded.ok()) {
        toolkit = *loaded;
        compiler = NewNvrtcCompiler(toolkit);
      } else {
        load_status = absl::FailedPreconditionError(
            absl::StrCat("cannot compile locally: ", loaded.status().message()));
      }
    }
    if (!load_status.ok()) return load_status;
    return compiler;
  }
};

LocalCompiler::LocalCompiler(std::string toolkit_root) : impl_(std::make_unique<Impl>()) {
  impl_->root = std::move(toolkit_root);
}

LocalCompiler::~LocalCompiler() = default;

std::string LocalCompiler::KernelIdOf(const KernelSource& source) {
  return ComputeKernelId(ToCoreSpec(source)).Hex();
}

absl::StatusOr<FetchedKernel> LocalCompiler::Compile(const KernelSource& source,
                                                     const Device& device) {
  auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (absl::Status s = CheckArchRange(source, device); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<Compiler>> compiler = impl_->Get();
  if (!compiler.ok()) return compiler.status();
  const Toolkit& toolkit = (*compiler)->toolkit();
  absl::StatusOr<Target> target = TargetFor(device, toolkit);
  if (!target.ok()) return target.status();

  CompileJob job;
  job.spec = ToCoreSpec(source);
  job.id = ComputeKernelId(job.spec);
  job.target = *target;
  absl::StatusOr<CompileOutput> output = (*compiler)->Compile(job);
  if (!output.ok()) return output.status();
  ArtifactKind want = target->kind == TargetKind::kSass ? ArtifactKind::kCubin : ArtifactKind::kPtx;
  for (Artifact& artifact : output->artifacts) {
    if (FromCoreKind(artifact.meta.key.kind) != want) continue;
    FetchedKernel kernel = FromCoreArtifact(std::move(artifact));
    kernel.served_from = ServedFrom::kLocalCompile;
    kernel.rule = ServeRule::kCompiled;
    kernel.needs_jit = want == ArtifactKind::kPtx;
    kernel.reason = absl::StrCat("compiled in this process with ", toolkit.identity().DisplayName(),
                                 " for ", kernel.target);
    kernel.micros = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    return kernel;
  }
  return absl::InternalError(
      absl::StrCat("NVRTC produced no ", ArtifactKindName(want), " for ", target->ToString()));
}

}  // namespace kcache::client
