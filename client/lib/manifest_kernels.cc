// A manifest's kernels as sources (LoadManifestKernels), from a YAML manifest or a baked one
// (docs/manifest.md, "Baked manifests"), and the baking (BakeManifest).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/lib/wire.h"
#include "core/manifest.h"
#include "kcache/kcache.h"
#include "kcache/v1/baked_manifest.pb.h"

namespace kcache::client {
namespace {

constexpr absl::string_view kBakedMagic = "KCBAKED1";
constexpr uint32_t kBakedVersion = 1;

// Moves the strings out of `spec` (parsed just for this).
KernelSource FromSpec(v1::KernelSpec& spec) {
  KernelSource s;
  s.name = std::move(*spec.mutable_name());
  s.source_name = std::move(*spec.mutable_source_name());
  s.source = std::move(*spec.mutable_source());
  for (v1::Header& header : *spec.mutable_headers()) {
    s.headers[header.name()] = std::move(*header.mutable_content());
  }
  for (std::string& option : *spec.mutable_options()) s.options.push_back(std::move(option));
  for (std::string& expression : *spec.mutable_name_expressions()) {
    s.name_expressions.push_back(std::move(expression));
  }
  s.min_arch = static_cast<int>(spec.min_arch());
  s.max_arch = static_cast<int>(spec.max_arch());
  s.want_ltoir = spec.want_ltoir();
  return s;
}

absl::StatusOr<std::vector<KernelSource>> ParseBaked(absl::string_view bytes,
                                                     const std::string& path) {
  v1::BakedManifest baked;
  bytes.remove_prefix(kBakedMagic.size());
  if (!baked.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": a damaged baked manifest (it does not parse); bake it again with "
                     "`kcache bake-manifest`"));
  }
  if (baked.version() != kBakedVersion || baked.kernels().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": baked manifest version ", baked.version(), " with ", baked.kernels_size(),
        " kernels; this libkcache reads version ", kBakedVersion,
        " with at least one kernel: bake it again with this version's `kcache bake-manifest`"));
  }
  std::vector<KernelSource> sources;
  sources.reserve(baked.kernels_size());
  for (v1::KernelSpec& spec : *baked.mutable_kernels()) sources.push_back(FromSpec(spec));
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

// The whole file in one read (a baked manifest is read on a worker's start).
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return absl::NotFoundError(
        absl::StrCat("cannot read manifest '", path, "': no such file or not readable"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got != bytes.size()) {
    return absl::NotFoundError(absl::StrCat("cannot read manifest '", path, "' whole"));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::vector<KernelSource>> LoadManifestKernels(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  if (absl::StartsWith(*bytes, kBakedMagic)) return ParseBaked(*bytes, path);
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
  for (const KernelSource& source : FromYaml(*manifest)) ToWire(source, baked.add_kernels());
  std::string bytes(kBakedMagic);
  baked.AppendToString(&bytes);
  std::string temporary = out_path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write '", temporary, "'"));
    }
  }
  if (std::rename(temporary.c_str(), out_path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("cannot move '", temporary, "' to '", out_path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace kcache::client
