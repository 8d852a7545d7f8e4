#include "client/lib/convert.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache::client {
namespace {

std::string ArchText(int arch) { return absl::StrCat(arch / 10, ".", arch % 10); }

}  // namespace

KernelSpec ToCoreSpec(const KernelSource& source) {
  KernelSpec spec;
  spec.name = source.name;
  spec.source = source.source;
  spec.headers = source.headers;
  spec.options = source.options;
  spec.name_expressions = source.name_expressions;
  return spec;
}

ArtifactKind FromCoreKind(::kcache::ArtifactKind kind) {
  switch (kind) {
    case ::kcache::ArtifactKind::kPtx:
      return ArtifactKind::kPtx;
    case ::kcache::ArtifactKind::kLtoir:
      return ArtifactKind::kLtoir;
    case ::kcache::ArtifactKind::kCubin:
      break;
  }
  return ArtifactKind::kCubin;
}

FetchedKernel FromCoreArtifact(Artifact artifact) {
  FetchedKernel k;
  const ArtifactMeta& m = artifact.meta;
  k.kind = FromCoreKind(m.key.kind);
  k.target = m.key.target.ToString();
  k.kernel_id = m.key.kernel_id.Hex();
  k.kernel_name = m.kernel_name;
  k.toolkit = m.key.toolkit;
  k.lowered_names = m.lowered_names;
  k.compile_log = m.compile_log;
  k.min_driver = m.min_driver;
  k.bytes = std::move(artifact.bytes);
  return k;
}

absl::Status CheckDevice(const Device& device) {
  if (device.sm_major < 1 || device.sm_major > 99 || device.sm_minor < 0 || device.sm_minor > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("device SM ", device.sm_major, ".", device.sm_minor,
                     " is not a compute capability; give major.minor, e.g. 8.9 (or detect it with "
                     "DetectDevices)"));
  }
  return absl::OkStatus();
}

absl::Status CheckArchRange(const KernelSource& source, const Device& device) {
  const std::string name = source.name.empty() ? "the kernel" : source.name;
  if (source.min_arch > 0 && device.arch() < source.min_arch) {
    return absl::NotFoundError(absl::StrCat("device ", device.ToString(), " is below ", name,
                                            "'s min_arch ", ArchText(source.min_arch)));
  }
  if (source.max_arch > 0 && device.arch() > source.max_arch) {
    return absl::NotFoundError(absl::StrCat("device ", device.ToString(), " is above ", name,
                                            "'s max_arch ", ArchText(source.max_arch)));
  }
  return absl::OkStatus();
}

}  // namespace kcache::client
