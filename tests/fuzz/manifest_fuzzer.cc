// Fuzzes the manifest parser (core/manifest.h): any text parses or is refused with
// InvalidArgument naming the manifest, and a manifest that parses is written back
// (WriteManifest, what `kcache export-manifest` prints) to one that parses to the same kernels
// (same ids, in the same order). Relative file paths resolve under a folder that does not
// exist, so the input reads nothing from the disk unless it names an absolute path.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/kernel_spec.h"
#include "core/manifest.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr char kPath[] = "/nonexistent-kcache-fuzz/manifest.yaml";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kcache::Manifest> manifest = kcache::ParseManifest(yaml, kPath);
  if (!manifest.ok()) {
    FUZZ_CHECK(manifest.status().code() == absl::StatusCode::kInvalidArgument,
               manifest.status().ToString());
    FUZZ_CHECK(absl::StartsWith(manifest.status().message(), kPath), manifest.status().ToString());
    return 0;
  }
  std::vector<kcache::KernelRecord> records;
  for (const kcache::ManifestKernel& kernel : manifest->kernels) records.push_back(kernel.record);
  std::string written = kcache::WriteManifest(records, "fuzz\nround trip");
  absl::StatusOr<kcache::Manifest> again = kcache::ParseManifest(written, kPath);
  FUZZ_CHECK(again.ok(), absl::StrCat(again.status().ToString(), "\n", written));
  FUZZ_CHECK(again->kernels.size() == records.size(), written);
  for (size_t i = 0; i < records.size(); ++i) {
    const kcache::KernelRecord& back = again->kernels[i].record;
    FUZZ_CHECK(back.id == records[i].id, absl::StrCat("kernels[", i, "] id\n", written));
    FUZZ_CHECK(back.arch.min_arch == records[i].arch.min_arch &&
                   back.arch.max_arch == records[i].arch.max_arch &&
                   back.want_ltoir == records[i].want_ltoir,
               absl::StrCat("kernels[", i, "] arch range or ltoir\n", written));
  }
  return 0;
}
