// CheckRunsOn and EntryPoints (kcache/device.h): a fetched kernel against a GPU by the serving
// rules, through core/load_check.h and core/entry_points.h.
#include "absl/strings/str_cat.h"
#include "client/lib/api_convert.h"
#include "core/entry_points.h"
#include "core/load_check.h"
#include "kcache/device.h"

namespace kcache::client {

absl::Status CheckRunsOn(const FetchedKernel& kernel, const GpuInfo& gpu) {
  LoadingArtifact artifact{.kernel_name = kernel.kernel_name,
                           .kind = ToCoreKind(kernel.kind),
                           .target = kernel.target,
                           .min_driver = kernel.min_driver};
  LoadingGpu loading{.ordinal = gpu.ordinal,
                     .name = gpu.name,
                     .sm = Sm{gpu.device.sm_major, gpu.device.sm_minor},
                     .driver = gpu.device.driver_version};
  return CheckArtifactForGpu(artifact, loading);
}

absl::StatusOr<std::vector<std::string>> EntryPoints(const FetchedKernel& kernel) {
  absl::StatusOr<std::vector<std::string>> entries =
      EntryPointsOf(ToCoreKind(kernel.kind), kernel.data());
  if (!entries.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel.kernel_name, " (", kernel.target, "): ", entries.status().message()));
  }
  return entries;
}

}  // namespace kcache::client
