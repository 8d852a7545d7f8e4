// The key and artifact layout of SASS built from a library's PTX (ptx_sass.h).
#include "engine/fatbin/ptx_sass.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/sha256.h"

namespace kcache::fatbin {

const std::vector<std::string>& PtxSassCompileOptions() {
  static const std::vector<std::string> options = {"-O3"};
  return options;
}

KernelId PtxModuleId(absl::string_view ptx, absl::string_view jit_options,
                     const std::vector<std::string>& compile_options) {
  Sha256 hash;
  hash.Update(absl::string_view("kcache.ptx-sass\0", 16));
  uint32_t version = 1;
  char le[8];
  std::memcpy(le, &version, 4);
  hash.Update(absl::string_view(le, 4));
  auto field = [&](absl::string_view bytes) {
    uint64_t n = bytes.size();
    std::memcpy(le, &n, 8);
    hash.Update(absl::string_view(le, 8));
    hash.Update(bytes);
  };
  field(ptx);
  field(jit_options);
  for (const std::string& option : compile_options) {
    hash.Update("O");
    field(option);
  }
  return KernelId(hash.Finish());
}

absl::StatusOr<Target> PtxTextTarget(absl::string_view ptx) {
  size_t at = 0;
  while (at < ptx.size()) {
    size_t end = ptx.find('\n', at);
    absl::string_view line = ptx.substr(at, end == absl::string_view::npos ? ptx.npos : end - at);
    at = end == absl::string_view::npos ? ptx.size() : end + 1;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, ".target")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    absl::string_view arch = line.substr(0, line.find_first_of(", \t\r/"));
    absl::StatusOr<Target> target = ParseTarget(arch);
    if (!absl::StartsWith(arch, "sm_") || !target.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the PTX's .target names '", absl::CHexEscape(arch.substr(0, 32)), "', not an sm_ arch"));
    }
    return target->WithKind(TargetKind::kPtx);
  }
  return absl::InvalidArgumentError("the text has no .target directive: it is not PTX");
}

ArtifactKey PtxSassKey(const KernelId& module, const Target& sass_target,
                       const std::string& toolkit_id) {
  ArtifactKey key;
  key.kernel_id = module;
  key.kind = ArtifactKind::kCubin;
  key.target = sass_target;
  key.toolkit = toolkit_id;
  return key;
}

bool IsPtxSassArtifact(const ArtifactMeta& meta) {
  return meta.key.kind == ArtifactKind::kCubin && !meta.lowered_names.empty() &&
         meta.lowered_names.front().first == kPtxSassMarker;
}

PtxSassOrigin PtxSassOriginOf(const ArtifactMeta& meta) {
  PtxSassOrigin origin;
  origin.library = meta.kernel_name;
  absl::StatusOr<Target> ptx = ParseTarget(meta.lowered_names.front().second);
  origin.ptx = ptx.ok() ? *ptx : Target{TargetKind::kPtx, {}, ArchVariant::kNone};
  return origin;
}

Artifact PtxSassArtifact(const ArtifactKey& key, const PtxSassOrigin& origin, std::string cubin,
                         std::string log, uint64_t compile_micros, uint32_t min_driver) {
  Artifact a;
  a.meta.key = key;
  a.meta.kernel_name = origin.library;
  a.meta.lowered_names = {{kPtxSassMarker, origin.ptx.ToString()}};
  a.meta.compile_log = std::move(log);
  a.meta.compile_micros = compile_micros;
  a.meta.created_unix_ms = NowUnixMillis();
  a.meta.last_used_unix_ms = a.meta.created_unix_ms;
  a.meta.min_driver = min_driver;
  a.bytes = std::move(cubin);
  return a;
}

}  // namespace kcache::fatbin
