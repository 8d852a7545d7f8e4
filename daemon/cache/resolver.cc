#include "daemon/cache/resolver.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/compile/compiler.h"
#include "daemon/store/store.h"

namespace kcache {
namespace {

bool Servable(const ArtifactMeta& meta, const Device& device) {
  if (meta.key.kind == ArtifactKind::kLtoir) return false;
  if (meta.key.kind == ArtifactKind::kCubin && meta.key.target.kind != TargetKind::kSass) return false;
  if (meta.key.kind == ArtifactKind::kPtx && meta.key.target.kind != TargetKind::kPtx) return false;
  if (device.driver != 0 && meta.min_driver > device.driver) return false;
  return CompatibilityOf(meta.key.target, device.sm).has_value();
}

std::string ReasonFor(ServeRule rule, const ArtifactMeta& meta, const Device& device) {
  std::string target = meta.key.target.ToString();
  std::string sm = device.sm.ToString();
  switch (rule) {
    case ServeRule::kExactSass:
      return absl::StrCat(target, " cubin matches device ", sm);
    case ServeRule::kCompatibleSass:
      return absl::StrCat("no sm_", device.sm.arch(), " cubin stored; ", target,
                          " cubin runs on ", sm, " (same major, lower minor)");
    case ServeRule::kPtxJit:
      return absl::StrCat("no cubin runs on ", sm, "; ", target,
                          " PTX is served and the driver must JIT it");
    case ServeRule::kCompiled:
      return absl::StrCat("nothing stored ran on ", sm, "; compiled ", target, " now");
  }
  return "";
}

absl::Status CheckArchRange(const KernelRecord& record, const Device& device) {
  int arch = device.sm.arch();
  if (record.arch.min_arch != 0 && arch < record.arch.min_arch) {
    return absl::NotFoundError(absl::StrCat(
        "kernel ", record.spec.name, " needs SM ", SmFromArch(record.arch.min_arch).ToString(),
        " or newer (its declared min_arch); device is ", device.sm.ToString()));
  }
  if (record.arch.max_arch != 0 && arch > record.arch.max_arch) {
    return absl::NotFoundError(absl::StrCat(
        "kernel ", record.spec.name, " supports SM up to ",
        SmFromArch(record.arch.max_arch).ToString(), " (its declared max_arch); device is ",
        device.sm.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Resolution> CompileForDevice(Store& store, const KernelRecord& record,
                                            const Device& device, Compiler& compiler) {
  CompileJob job{record.spec, record.id, Target{TargetKind::kSass, device.sm, ArchVariant::kNone},
                 false};
  absl::StatusOr<CompileOutput> output = compiler.Compile(job);
  if (!output.ok()) return output.status();
  std::optional<Resolution> served;
  for (Artifact& artifact : output->artifacts) {
    if (absl::Status s = store.Put(artifact); !s.ok()) return s;
    if (artifact.meta.key.kind == ArtifactKind::kCubin) {
      served = Resolution{artifact, ServeRule::kCompiled,
                          ReasonFor(ServeRule::kCompiled, artifact.meta, device)};
    }
  }
  if (!served) return absl::InternalError("compile produced no cubin");
  return *std::move(served);
}

}  // namespace

std::vector<ArtifactMeta> RankCandidates(const std::vector<ArtifactMeta>& artifacts,
                                         const Device& device) {
  std::vector<ArtifactMeta> out;
  for (const ArtifactMeta& meta : artifacts) {
    if (Servable(meta, device)) out.push_back(meta);
  }
  std::stable_sort(out.begin(), out.end(), [&](const ArtifactMeta& a, const ArtifactMeta& b) {
    if (a.key.target != b.key.target) return BetterFor(device.sm, a.key.target, b.key.target);
    return a.created_unix_ms > b.created_unix_ms;  // same target, several toolkits: newest
  });
  return out;
}

absl::StatusOr<Resolution> ResolveFromStore(Store& store, const KernelId& id,
                                            const Device& device, Compiler* compiler) {
  absl::StatusOr<KernelRecord> record = store.GetKernel(id);
  if (!record.ok() && !absl::IsNotFound(record.status())) return record.status();
  if (record.ok()) {
    if (absl::Status s = CheckArchRange(*record, device); !s.ok()) return s;
  }

  absl::StatusOr<std::vector<ArtifactMeta>> artifacts = store.ListArtifacts(id);
  if (!artifacts.ok()) return artifacts.status();
  for (const ArtifactMeta& meta : RankCandidates(*artifacts, device)) {
    absl::StatusOr<Artifact> artifact = store.Get(meta.key);
    if (!artifact.ok()) continue;  // corrupt or vanished: counted by the store; try the next
    ServeRule rule = *CompatibilityOf(meta.key.target, device.sm);
    return Resolution{*std::move(artifact), rule, ReasonFor(rule, meta, device)};
  }

  if (!record.ok()) {
    return absl::NotFoundError(absl::StrCat(
        "kernel ", id.ShortHex(), " is unknown to this store and no artifact of it is stored; "
        "warm it with `kcache warm` or send its spec"));
  }
  if (compiler == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "no stored artifact of ", record->spec.name, " runs on ", device.sm.ToString(),
        " and no toolkit is loaded to compile one; warm it with `kcache warm --arch ",
        device.sm.ToString(), "` or give a toolkit (--toolkit / CUDA_HOME)"));
  }
  return CompileForDevice(store, *record, device, *compiler);
}

absl::StatusOr<KernelRecord> FindKernel(Store& store, absl::string_view name_or_id) {
  std::string wanted = absl::AsciiStrToLower(name_or_id);
  if (wanted.size() == 2 * KernelId::kSize) {
    absl::StatusOr<KernelId> id = KernelId::FromHex(wanted);
    if (id.ok()) {
      absl::StatusOr<KernelRecord> record = store.GetKernel(*id);
      if (record.ok() || !absl::IsNotFound(record.status())) return record;
    }
  }
  absl::StatusOr<std::vector<KernelRecord>> records = store.ListKernels();
  if (!records.ok()) return records.status();
  const KernelRecord* best = nullptr;
  int prefix_matches = 0;
  const KernelRecord* by_prefix = nullptr;
  for (const KernelRecord& r : *records) {
    if (r.spec.name == name_or_id) {
      if (best == nullptr || r.registered_unix_ms > best->registered_unix_ms) best = &r;
    } else if (wanted.size() >= 8 && absl::StartsWith(r.id.Hex(), wanted)) {
      ++prefix_matches;
      by_prefix = &r;
    }
  }
  if (best != nullptr) return *best;
  if (prefix_matches == 1) return *by_prefix;
  if (prefix_matches > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel id prefix '", name_or_id, "' matches ", prefix_matches,
        " kernels; give more digits (see `kcache ls`)"));
  }
  return absl::NotFoundError(absl::StrCat("no kernel named or with id '", name_or_id,
                                          "' in the store; `kcache ls` lists what it holds"));
}

}  // namespace kcache
