// A manifest's kernels as sources (LoadManifestKernels), from a YAML manifest or a baked one
// (docs/manifest.md, "Baked manifests"), and the baking (BakeManifest).
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/lib/api_convert.h"
#include "client/lib/known_kernel_ids.h"
#include "client/lib/wire.h"
#include "core/artifact.h"
#include "core/coding.h"
#include "core/file_io.h"
#include "core/kernel_spec.h"
#include "core/manifest.h"
#include "kcache/kcache.h"
#include "kcache/v1/baked_manifest.pb.h"

namespace kcache::client {
namespace {

// Version 1: the magic, then the BakedManifest. Version 2 (written now): the magic, the
// XXH3-64 of what follows (8 bytes, little-endian), then the BakedManifest with the kernels'
// ids, trusted only under that checksum.
constexpr absl::string_view kBakedMagicPrefix = "KCBAKED";
constexpr absl::string_view kBakedMagicV1 = "KCBAKED1";
constexpr absl::string_view kBakedMagicV2 = "KCBAKED2";
constexpr uint32_t kBakedVersion = 2;

// Moves the strings out of `spec` (parsed just for this). With `id` (32 bytes, as baked beside
// it), remembers it as the kernel's id (known_kernel_ids.h), fingerprinted on the way.
KernelSource FromSpec(v1::KernelSpec& spec, const std::string* id) {
  KernelSpec core;
  core.source = std::move(*spec.mutable_source());
  for (v1::Header& header : *spec.mutable_headers()) {
    core.headers[header.name()] = std::move(*header.mutable_content());
  }
  for (std::string& option : *spec.mutable_options()) core.options.push_back(std::move(option));
  for (std::string& expression : *spec.mutable_name_expressions()) {
    core.name_expressions.push_back(std::move(expression));
  }
  if (id != nullptr) {
    if (absl::StatusOr<KernelId> known = KernelId::FromBytes(*id); known.ok()) {
      RememberKernelId(core, *known);
    }
  }
  KernelSource s;
  s.name = std::move(*spec.mutable_name());
  s.source_name = std::move(*spec.mutable_source_name());
  s.source = std::move(core.source);
  s.headers = std::move(core.headers);
  s.options = std::move(core.options);
  s.name_expressions = std::move(core.name_expressions);
  s.min_arch = static_cast<int>(spec.min_arch());
  s.max_arch = static_cast<int>(spec.max_arch());
  s.want_ltoir = spec.want_ltoir();
  return s;
}

absl::StatusOr<std::vector<KernelSource>> ParseBaked(absl::string_view bytes,
                                                     const std::string& path) {
  uint32_t version = absl::StartsWith(bytes, kBakedMagicV1)   ? 1
                     : absl::StartsWith(bytes, kBakedMagicV2) ? 2
                                                              : 0;
  bytes.remove_prefix(kBakedMagicV1.size());
  if (version == 2) {
    uint64_t checksum = 0;
    if (!GetFixed64(bytes, &checksum) || PayloadChecksum(bytes) != checksum) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": a damaged baked manifest (its XXH3-64 checksum does not match its contents); bake "
          "it again with `kcache bake-manifest`"));
    }
  }
  v1::BakedManifest baked;
  if (!baked.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": a damaged baked manifest (it does not parse); bake it again with "
                     "`kcache bake-manifest`"));
  }
  if (version == 0 || baked.version() != version || baked.kernels().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": baked manifest version ", baked.version(), " with ", baked.kernels_size(),
        " kernels; this libkcache reads versions 1 to ", kBakedVersion,
        " with at least one kernel: bake it again with this version's `kcache bake-manifest`"));
  }
  // The ids as baked, under the checksum: vouched for as the sources are.
  bool with_ids = version >= 2 && baked.kernel_ids_size() == baked.kernels_size();
  std::vector<KernelSource> sources;
  sources.reserve(baked.kernels_size());
  for (int i = 0; i < baked.kernels_size(); ++i) {
    sources.push_back(
        FromSpec(*baked.mutable_kernels(i), with_ids ? &baked.kernel_ids(i) : nullptr));
  }
  return sources;
}

std::vector<KernelSource> FromYaml(const Manifest& manifest) {
  std::vector<KernelSource> sources;
  sources.reserve(manifest.kernels.size());
  for (const ManifestKernel& kernel : manifest.kernels) {
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

}  // namespace

absl::StatusOr<std::vector<KernelSource>> LoadManifestKernels(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);  // one read: a worker's start
  if (!bytes.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot read manifest: ", bytes.status().message()));
  }
  if (absl::StartsWith(*bytes, kBakedMagicPrefix)) return ParseBaked(*bytes, path);
  absl::StatusOr<Manifest> manifest = ParseManifest(*bytes, path);
  if (!manifest.ok()) return manifest.status();
  return FromYaml(*manifest);
}

absl::Status BakeManifest(const std::string& manifest_path, const std::string& out_path) {
  absl::StatusOr<Manifest> manifest = LoadManifest(manifest_path);
  if (!manifest.ok()) return manifest.status();
  v1::BakedManifest baked;
  baked.set_version(kBakedVersion);
  baked.set_baked_from(manifest_path);
  for (const KernelSource& source : FromYaml(*manifest)) {
    ToWire(source, baked.add_kernels());
    baked.add_kernel_ids(std::string(ComputeKernelId(ToCoreSpec(source)).Bytes()));
  }
  std::string payload = baked.SerializeAsString();
  uint64_t checksum = PayloadChecksum(payload);
  std::string bytes(kBakedMagicV2);
  PutFixed64(bytes, checksum);
  bytes += payload;
  return WriteFileAtomically(out_path, bytes);  // PermissionDenied: bake-manifest exits 1
}

}  // namespace kcache::client
