#include "client/lib/api_convert.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/target.h"
#include "engine/resolve/decide.h"

namespace kcache::client {

KernelSpec ToCoreSpec(const KernelSource& source) {
  KernelSpec spec;
  spec.name = source.name;
  spec.source_name = source.source_name;
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
    case ::kcache::ArtifactKind::kObject:  // never a kernel's artifact
      break;
  }
  return ArtifactKind::kCubin;
}

::kcache::ArtifactKind ToCoreKind(ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::kPtx:
      return ::kcache::ArtifactKind::kPtx;
    case ArtifactKind::kLtoir:
      return ::kcache::ArtifactKind::kLtoir;
    case ArtifactKind::kCubin:
      break;
  }
  return ::kcache::ArtifactKind::kCubin;
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
  return ValidateDeviceSm(device.sm_major, device.sm_minor);
}

absl::Status CheckArchRange(const KernelSource& source, const Device& device) {
  KernelRecord record;
  record.spec.name = source.name.empty() ? "the kernel" : source.name;
  record.arch = ArchRange{source.min_arch, source.max_arch};
  return ::kcache::CheckArchRange(
      record, ::kcache::Device{Sm{device.sm_major, device.sm_minor}, device.driver_version});
}

}  // namespace kcache::client
