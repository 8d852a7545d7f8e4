// CheckArtifactForGpu and the two facts it and the serving decision share.
#include "core/load_check.h"

#include "absl/strings/str_cat.h"
#include "core/cubin.h"

namespace kcache {
namespace {

std::string KernelLabel(const LoadingArtifact& artifact) {
  return artifact.kernel_name.empty() ? "the kernel" : artifact.kernel_name;
}

std::string SmName(Sm sm) { return absl::StrCat("sm_", sm.arch()); }

// "GPU 0 is NVIDIA H100 (sm_90)", or "GPU 0 is sm_90" without a name.
std::string GpuLabel(const LoadingGpu& gpu) {
  if (gpu.name.empty()) return absl::StrCat("GPU ", gpu.ordinal, " is ", SmName(gpu.sm));
  return absl::StrCat("GPU ", gpu.ordinal, " is ", gpu.name, " (", SmName(gpu.sm), ")");
}

// Where code built for `target` runs, as the serving rules say (core/compat.h).
std::string WhereItRuns(const Target& target) {
  const std::string sm = target.sm.ToString();
  const std::string what =
      absl::StrCat(target.ToString(), " ", target.kind == TargetKind::kSass ? "SASS" : "PTX");
  if (target.variant == ArchVariant::kArchSpecific) {
    return absl::StrCat(what, " runs only on ", sm, " GPUs");
  }
  if (target.kind == TargetKind::kSass || target.variant == ArchVariant::kFamily) {
    return absl::StrCat(what, " runs only on ", sm, " and later ", target.sm.major, ".x GPUs");
  }
  return absl::StrCat(what, " is JIT-compiled only for ", sm, " and later GPUs");
}

}  // namespace

std::optional<ServeRule> ArtifactRunsOn(ArtifactKind kind, const Target& target, Sm sm) {
  switch (kind) {
    case ArtifactKind::kLtoir:
    case ArtifactKind::kObject:
      return std::nullopt;
    case ArtifactKind::kCubin:
      if (target.kind != TargetKind::kSass) return std::nullopt;
      break;
    case ArtifactKind::kPtx:
      if (target.kind != TargetKind::kPtx) return std::nullopt;
      break;
  }
  return CompatibilityOf(target, sm);
}

bool DriverLoads(uint32_t driver, uint32_t min_driver) {
  return driver == 0 || min_driver <= driver;
}

absl::Status CheckCubinForDriver(absl::string_view bytes, uint32_t driver) {
  if (driver == 0 || !IsCudaElf(bytes)) return absl::OkStatus();
  absl::StatusOr<CubinToolkitVersion> toolkit = CubinToolkit(bytes);
  if (!toolkit.ok()) return toolkit.status();
  uint32_t min_driver = MinDriverFor(ArtifactKind::kCubin, toolkit->major, toolkit->minor);
  if (DriverLoads(driver, min_driver)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("a cubin built by CUDA ", toolkit->major, ".", toolkit->minor, " needs driver ",
                   DriverText(min_driver), " or newer; the driver is ", DriverText(driver)));
}

absl::Status CheckArtifactForGpu(const LoadingArtifact& artifact, const LoadingGpu& gpu) {
  const std::string kernel = KernelLabel(artifact);
  if (artifact.kind == ArtifactKind::kLtoir) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, " is LTO-IR, which the driver cannot load: link it first"));
  }
  absl::StatusOr<Target> target = ParseTarget(artifact.target);
  if (!target.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, " has no loadable target ('", artifact.target, "'): ", target.status().message()));
  }
  const bool cubin = artifact.kind == ArtifactKind::kCubin;
  if (cubin != (target->kind == TargetKind::kSass)) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, " is ", ArtifactKindName(artifact.kind),
                                                   " but its target is ", target->ToString(),
                                                   ": the artifact is damaged; resolve it again"));
  }
  const std::string resolve_for = absl::StrCat("resolve it for ", gpu.sm.ToString());
  if (!ArtifactRunsOn(artifact.kind, *target, gpu.sm).has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kernel, " is ", target->ToString(), cubin ? " SASS; " : " PTX; ",
                     GpuLabel(gpu), ": ", resolve_for, " (", WhereItRuns(*target), ")"));
  }
  if (!DriverLoads(gpu.driver, artifact.min_driver)) {
    return absl::FailedPreconditionError(
        absl::StrCat(kernel, " is ", target->ToString(), cubin ? " SASS" : " PTX",
                     " that needs driver ", DriverText(artifact.min_driver), " or newer; ",
                     GpuLabel(gpu), " with driver ", DriverText(gpu.driver),
                     ": update the driver, or ", resolve_for, " with driver ", gpu.driver));
  }
  return absl::OkStatus();
}

}  // namespace kcache
