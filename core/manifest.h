// The kernel manifest (docs/manifest.md): a YAML file listing kernels to warm.
#ifndef KCACHE_CORE_MANIFEST_H_
#define KCACHE_CORE_MANIFEST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/kernel_spec.h"

namespace kcache {

inline constexpr int kManifestVersion = 1;

// One kernel of a manifest; a variant of a manifest entry is a kernel of its own, named
// "<entry>.<variant>", with the entry's options followed by the variant's.
struct ManifestKernel {
  KernelRecord record;      // spec (name, source, headers, options, expressions), id, arch range
  std::string source_path;  // the source file as resolved, for messages
  int cost_ms = 0;          // expected NVRTC milliseconds per target (0 = unknown)
};

struct Manifest {
  std::string path;  // as given, for messages
  std::vector<ManifestKernel> kernels;

  // The kernel named `name`, or null.
  const ManifestKernel* Find(absl::string_view name) const;
};

// Reads and validates a manifest. Source and header paths are relative to the manifest's
// folder and are read here. Every error names the file, line and field and says what to do,
// e.g. "kernels/manifest.yaml:14:16: kernels[2].min_arch: '8.x' is not an architecture; write
// it as major.minor, e.g. 8.0". Checked: version, unknown fields (typos), names unique and
// [a-z0-9_]+, files exist, options allowed (ValidateCompileOptions), archs parse and
// min_arch <= max_arch.
absl::StatusOr<Manifest> LoadManifest(const std::string& path);

// As LoadManifest, from text; `path` is used in messages and to resolve relative files.
absl::StatusOr<Manifest> ParseManifest(absl::string_view yaml, const std::string& path);

// A manifest made of kernel records (kernels that arrived over the wire): no files, no costs.
Manifest ManifestFromRecords(std::vector<KernelRecord> records);

// A self-contained manifest for `records` (sources and headers inline, as `source_text` and
// `header_texts`), which LoadManifest reads back to the same kernel ids. `comment` lines go
// at the top, each prefixed with "# ".
std::string WriteManifest(const std::vector<KernelRecord>& records, absl::string_view comment);

}  // namespace kcache

#endif  // KCACHE_CORE_MANIFEST_H_
