#include "core/manifest.h"
#include "kcache/kcache.h"

namespace kcache::client {

absl::StatusOr<std::vector<KernelSource>> LoadManifestKernels(const std::string& path) {
  absl::StatusOr<Manifest> manifest = LoadManifest(path);
  if (!manifest.ok()) return manifest.status();
  std::vector<KernelSource> sources;
  sources.reserve(manifest->kernels.size());
  for (const ManifestKernel& kernel : manifest->kernels) {
    const KernelRecord& r = kernel.record;
    KernelSource s;
    s.name = r.spec.name;
    s.source_name = r.spec.source_name;
    s.source = r.spec.source;
    s.headers = r.spec.headers;
    s.options = r.spec.options;
    s.name_expressions = r.spec.name_expressions;
    s.min_arch = r.arch.min_arch;
    s.max_arch = r.arch.max_arch;
    s.want_ltoir = r.want_ltoir;
    sources.push_back(std::move(s));
  }
  return sources;
}

}  // namespace kcache::client
