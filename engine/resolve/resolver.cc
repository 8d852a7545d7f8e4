#include "engine/resolve/resolver.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/compile/compiler.h"
#include "engine/store/store.h"

namespace kcache {
namespace {

constexpr MissReason kAllMissReasons[] = {MissReason::kUnknownKernel,     MissReason::kBelowMinArch,
                                          MissReason::kAboveMaxArch,      MissReason::kNoToolkit,
                                          MissReason::kCompileNotAllowed, MissReason::kCompileError,
                                          MissReason::kNothingServable};

bool Servable(const ArtifactMeta& meta, const Device& device) {
  if (meta.key.kind == ArtifactKind::kLtoir) return false;
  if (meta.key.kind == ArtifactKind::kCubin && meta.key.target.kind != TargetKind::kSass)
    return false;
  if (meta.key.kind == ArtifactKind::kPtx && meta.key.target.kind != TargetKind::kPtx) return false;
  if (device.driver != 0 && meta.min_driver > device.driver) return false;
  return CompatibilityOf(meta.key.target, device.sm).has_value();
}

// A single store seen as the only tier.
class OneStore : public StoreTiers {
 public:
  explicit OneStore(Store& store) : store_(store) {}
  size_t size() const override { return 1; }
  absl::StatusOr<KernelRecord> GetKernel(size_t, const KernelId& id) override {
    return store_.GetKernel(id);
  }
  absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(size_t, const KernelId& id) override {
    return store_.ListArtifacts(id);
  }
  absl::StatusOr<Artifact> Get(size_t, const ArtifactKey& key) override { return store_.Get(key); }

 private:
  Store& store_;
};

absl::StatusOr<Resolution> CompileForDevice(Store& store, const KernelRecord& record,
                                            const Device& device, Compiler& compiler) {
  absl::StatusOr<CompileOutput> output = compiler.Compile(CompileJobFor(record, device));
  if (!output.ok()) {
    return WithMissReason(output.status(), absl::IsAborted(output.status())
                                               ? MissReason::kCompileError
                                               : MissReason::kNothingServable);
  }
  std::optional<Resolution> served;
  for (Artifact& artifact : output->artifacts) {
    if (absl::Status s = store.Put(artifact); !s.ok()) return s;
    if (artifact.meta.key.kind == ArtifactKind::kCubin) {
      served = Resolution{artifact, ServeRule::kCompiled,
                          ServeReason(ServeRule::kCompiled, artifact.meta, device)};
    }
  }
  if (!served) return absl::InternalError("compile produced no cubin");
  return *std::move(served);
}

}  // namespace

absl::string_view MissReasonName(MissReason reason) {
  switch (reason) {
    case MissReason::kUnknownKernel:
      return "unknown_kernel";
    case MissReason::kBelowMinArch:
      return "below_min_arch";
    case MissReason::kAboveMaxArch:
      return "above_max_arch";
    case MissReason::kNoToolkit:
      return "no_toolkit";
    case MissReason::kCompileNotAllowed:
      return "compile_not_allowed";
    case MissReason::kCompileError:
      return "compile_error";
    case MissReason::kNothingServable:
      return "nothing_servable";
  }
  return "unknown";
}

std::optional<MissReason> MissReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kMissReasonPayload);  // absl::optional here
  if (!payload) return std::nullopt;
  for (MissReason reason : kAllMissReasons) {
    if (*payload == MissReasonName(reason)) return reason;
  }
  return std::nullopt;
}

absl::Status WithMissReason(absl::Status status, MissReason reason) {
  if (!status.ok()) status.SetPayload(kMissReasonPayload, absl::Cord(MissReasonName(reason)));
  return status;
}

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

std::string ServeReason(ServeRule rule, const ArtifactMeta& meta, const Device& device) {
  std::string target = meta.key.target.ToString();
  std::string sm = device.sm.ToString();
  switch (rule) {
    case ServeRule::kExactSass:
      return absl::StrCat(target, " cubin matches device ", sm);
    case ServeRule::kCompatibleSass:
      return absl::StrCat("no sm_", device.sm.arch(), " cubin stored; ", target, " cubin runs on ",
                          sm, " (same major, lower minor)");
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
    return WithMissReason(
        absl::NotFoundError(absl::StrCat(
            "kernel ", record.spec.name, " needs SM ", SmFromArch(record.arch.min_arch).ToString(),
            " or newer (its declared min_arch); device is ", device.sm.ToString())),
        MissReason::kBelowMinArch);
  }
  if (record.arch.max_arch != 0 && arch > record.arch.max_arch) {
    return WithMissReason(absl::NotFoundError(absl::StrCat(
                              "kernel ", record.spec.name, " supports SM up to ",
                              SmFromArch(record.arch.max_arch).ToString(),
                              " (its declared max_arch); device is ", device.sm.ToString())),
                          MissReason::kAboveMaxArch);
  }
  return absl::OkStatus();
}

absl::StatusOr<StoredLookup> LookupStored(StoreTiers& tiers, const KernelId& id,
                                          const Device& device) {
  StoredLookup out;
  auto note = [&out](const absl::Status& s) {
    if (!s.ok() && !absl::IsNotFound(s) && out.first_failure.ok()) out.first_failure = s;
  };
  for (size_t t = 0; t < tiers.size() && !out.record; ++t) {
    absl::StatusOr<KernelRecord> record = tiers.GetKernel(t, id);
    if (record.ok())
      out.record = *std::move(record);
    else
      note(record.status());
  }
  if (out.record) {
    if (absl::Status s = CheckArchRange(*out.record, device); !s.ok()) return s;
  }

  // Every tier's candidates, ranked together; each key remembers the tiers holding it.
  std::vector<ArtifactMeta> candidates;
  std::map<ArtifactKey, std::vector<size_t>> holders;
  for (size_t t = 0; t < tiers.size(); ++t) {
    absl::StatusOr<std::vector<ArtifactMeta>> listed = tiers.ListArtifacts(t, id);
    if (!listed.ok()) {
      note(listed.status());
      continue;
    }
    ++out.tiers_answered;
    for (ArtifactMeta& meta : *listed) {
      std::vector<size_t>& where = holders[meta.key];
      if (where.empty()) candidates.push_back(std::move(meta));
      where.push_back(t);
    }
  }
  for (const ArtifactMeta& meta : RankCandidates(candidates, device)) {
    for (size_t t : holders[meta.key]) {
      absl::StatusOr<Artifact> artifact = tiers.Get(t, meta.key);
      if (!artifact.ok()) {
        note(artifact.status());  // corrupt or vanished: counted by the store; try the next
        continue;
      }
      ServeRule rule = *CompatibilityOf(meta.key.target, device.sm);
      out.hit = Resolution{*std::move(artifact), rule, ServeReason(rule, meta, device)};
      out.hit_tier = t;
      return out;
    }
  }
  return out;
}

absl::Status CheckCompileAllowed(const KernelId& id, const KernelRecord* record,
                                 const Device& device, bool allow_compile, bool have_compiler) {
  if (record == nullptr) {
    return WithMissReason(
        absl::NotFoundError(absl::StrCat("kernel ", id.ShortHex(),
                                         " is unknown (no store holds its spec) and no stored "
                                         "artifact of it runs on ",
                                         device.sm.ToString(),
                                         "; warm it with `kcache warm` or send its spec")),
        MissReason::kUnknownKernel);
  }
  std::string nothing =
      absl::StrCat("no stored artifact of ", record->spec.name, " runs on ", device.sm.ToString());
  if (!allow_compile) {
    return WithMissReason(
        absl::NotFoundError(
            absl::StrCat(nothing,
                         " and the request did not allow compiling one; allow compiling or warm it "
                         "with `kcache warm --arch ",
                         device.sm.ToString(), "`")),
        MissReason::kCompileNotAllowed);
  }
  if (!have_compiler) {
    return WithMissReason(absl::NotFoundError(absl::StrCat(
                              nothing,
                              " and no toolkit is loaded to compile one; warm it with `kcache warm "
                              "--arch ",
                              device.sm.ToString(), "` or give a toolkit (--toolkit / CUDA_HOME)")),
                          MissReason::kNoToolkit);
  }
  return absl::OkStatus();
}

CompileJob CompileJobFor(const KernelRecord& record, const Device& device) {
  return CompileJob{record.spec, record.id,
                    Target{TargetKind::kSass, device.sm, ArchVariant::kNone}, record.want_ltoir};
}

absl::StatusOr<Resolution> ResolveFromStore(Store& store, const KernelId& id, const Device& device,
                                            Compiler* compiler) {
  OneStore tiers(store);
  absl::StatusOr<StoredLookup> lookup = LookupStored(tiers, id, device);
  if (!lookup.ok()) return lookup.status();
  if (lookup->hit) return *std::move(lookup->hit);
  if (!lookup->first_failure.ok()) return lookup->first_failure;
  const KernelRecord* record = lookup->record ? &*lookup->record : nullptr;
  if (absl::Status s = CheckCompileAllowed(id, record, device, true, compiler != nullptr);
      !s.ok()) {
    return s;
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
    return absl::InvalidArgumentError(absl::StrCat("kernel id prefix '", name_or_id, "' matches ",
                                                   prefix_matches,
                                                   " kernels; give more digits (see `kcache ls`)"));
  }
  return absl::NotFoundError(absl::StrCat("no kernel named or with id '", name_or_id,
                                          "' in the store; `kcache ls` lists what it holds"));
}

}  // namespace kcache
