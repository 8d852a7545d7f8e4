#include "engine/resolve/decide.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/load_check.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"

namespace kcache {
namespace {

// Whether the artifact's code runs on the device, its driver aside.
bool RunsOn(const ArtifactMeta& meta, const Device& device) {
  return ArtifactRunsOn(meta.key.kind, meta.key.target, device.sm).has_value();
}

bool Servable(const ArtifactMeta& meta, const Device& device) {
  return RunsOn(meta, device) && DriverLoads(device.driver, meta.min_driver);
}

// Appended to a reason when the driver is unknown: what serving assumed.
std::string AssumedDriver(const Device& device, uint32_t min_driver) {
  if (device.driver != 0 || min_driver == 0) return "";
  return absl::StrCat("; driver unknown, assumed ", DriverText(min_driver), " or newer");
}

std::string Version(const Toolkit& toolkit) {
  return absl::StrCat(toolkit.identity().major, ".", toolkit.identity().minor);
}

// The oldest driver that loads what `toolkit` builds for a sm_ target.
uint32_t CubinMinDriver(const Toolkit& toolkit) {
  return MinDriverFor(ArtifactKind::kCubin, toolkit.identity().major, toolkit.identity().minor);
}

bool Supports(const Toolkit& toolkit, int arch) {
  const std::vector<int>& archs = toolkit.supported_archs();
  return std::find(archs.begin(), archs.end(), arch) != archs.end();
}

// Why nothing can compile the device's SASS for this driver, as a miss: kDriverTooOld when some
// toolkit supports the SM but the driver loads none of those, else kNothingServable.
absl::Status NoToolkitFits(absl::string_view nothing, absl::Span<const Toolkit* const> toolkits,
                           const Device& device) {
  std::vector<const Toolkit*> supporting;
  for (const Toolkit* t : toolkits) {
    if (Supports(*t, device.sm.arch())) supporting.push_back(t);
  }
  if (!supporting.empty()) {
    const Toolkit* oldest = *std::min_element(
        supporting.begin(), supporting.end(),
        [](const Toolkit* a, const Toolkit* b) { return CubinMinDriver(*a) < CubinMinDriver(*b); });
    return WithMissReason(
        absl::NotFoundError(absl::StrCat(
            nothing, ": driver ", DriverText(device.driver), " cannot load code built by NVRTC ",
            Version(*oldest), " (needs ", DriverText(CubinMinDriver(*oldest)),
            " or newer); load an older toolkit with --toolkit or update the driver")),
        MissReason::kDriverTooOld);
  }
  std::vector<std::string> loaded;
  for (const Toolkit* t : toolkits) loaded.push_back(t->identity().DisplayName());
  return WithMissReason(absl::NotFoundError(absl::StrCat(
                            nothing, ": no loaded toolkit supports sm_", device.sm.arch(), " (",
                            absl::StrJoin(loaded, ", "), "); load one that does with --toolkit")),
                        MissReason::kNothingServable);
}

// For a device no loaded toolkit has SASS for: the newest toolkit the driver loads PTX of that
// supports an arch below the device, and that arch (its PTX runs on the device through the
// driver's JIT). nullopt when none.
std::optional<std::pair<size_t, int>> PtxFallback(absl::Span<const Toolkit* const> toolkits,
                                                  const Device& device) {
  std::optional<std::pair<size_t, int>> best;
  for (size_t i = 0; i < toolkits.size(); ++i) {
    const ToolkitIdentity& v = toolkits[i]->identity();
    if (!DriverLoads(device.driver, MinDriverFor(ArtifactKind::kPtx, v.major, v.minor))) continue;
    int arch = 0;
    for (int a : toolkits[i]->supported_archs()) {
      if (a <= device.sm.arch()) arch = std::max(arch, a);
    }
    if (arch == 0) continue;
    if (!best || arch > best->second) best = std::make_pair(i, arch);
  }
  return best;
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
    // Same target from several toolkits (all loadable by the driver): the newest toolkit's,
    // then the most recently made.
    if (a.min_driver != b.min_driver) return a.min_driver > b.min_driver;
    return a.created_unix_ms > b.created_unix_ms;
  });
  return out;
}

std::string ServeReason(ServeRule rule, const ArtifactMeta& meta, const Device& device) {
  std::string target = meta.key.target.ToString();
  std::string sm = device.sm.ToString();
  std::string assumed = AssumedDriver(device, meta.min_driver);
  switch (rule) {
    case ServeRule::kExactSass:
      return absl::StrCat(target, " cubin matches device ", sm, assumed);
    case ServeRule::kCompatibleSass:
      return absl::StrCat("no sm_", device.sm.arch(), " cubin stored; ", target, " cubin runs on ",
                          sm, " (same major, lower minor)", assumed);
    case ServeRule::kPtxJit:
      return absl::StrCat("no cubin runs on ", sm, "; ", target,
                          " PTX is served and the driver must JIT it", assumed);
    case ServeRule::kCompiled:
      return absl::StrCat("nothing stored ran on ", sm, "; compiled ", target, " now", assumed);
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
                                          const Device& device,
                                          const std::shared_ptr<const Artifact>& held) {
  StoredLookup out;
  auto note = [&out](const absl::Status& s) {
    if (!s.ok() && !absl::IsNotFound(s) && out.first_failure.ok()) out.first_failure = s;
  };
  for (size_t t = 0; t < tiers.size() && !out.record; ++t) {
    absl::StatusOr<KernelRecord> record = tiers.GetKernel(t, id);
    if (record.ok()) {
      out.record = *std::move(record);
    } else {
      note(record.status());
    }
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
      if (RunsOn(meta, device) && !DriverLoads(device.driver, meta.min_driver) &&
          (out.refused_min_driver == 0 || meta.min_driver < out.refused_min_driver)) {
        out.refused_min_driver = meta.min_driver;
      }
      std::vector<size_t>& where = holders[meta.key];
      if (where.empty()) candidates.push_back(std::move(meta));
      where.push_back(t);
    }
  }
  for (const ArtifactMeta& meta : RankCandidates(candidates, device)) {
    bool is_held =
        held != nullptr && held->meta.key == meta.key && held->meta.checksum == meta.checksum;
    for (size_t t : holders[meta.key]) {
      std::shared_ptr<const Artifact> artifact = held;
      if (!is_held) {
        absl::StatusOr<Artifact> read = tiers.Get(t, meta.key);
        if (!read.ok()) {
          note(read.status());  // corrupt or vanished: counted by the store; try the next
          continue;
        }
        artifact = std::make_shared<const Artifact>(*std::move(read));
      }
      ServeRule rule = *CompatibilityOf(meta.key.target, device.sm);
      out.hit = Answer{std::move(artifact), rule, ServeReason(rule, meta, device)};
      out.hit_tier = t;
      return out;
    }
  }
  return out;
}

std::optional<size_t> PickToolkit(absl::Span<const Toolkit* const> toolkits, uint32_t driver,
                                  int arch) {
  std::optional<size_t> best;
  for (size_t i = 0; i < toolkits.size(); ++i) {
    const Toolkit& t = *toolkits[i];
    if (!Supports(t, arch) || !DriverLoads(driver, CubinMinDriver(t))) continue;
    if (!best || t.identity().NewerThan(toolkits[*best]->identity())) best = i;
  }
  return best;
}

CompileJob CompileJobFor(const KernelRecord& record, const Device& device) {
  return CompileJob{
      record.spec,       record.id, Target{TargetKind::kSass, device.sm, ArchVariant::kNone},
      record.want_ltoir, {},        {}};
}

namespace {

// DecideResolve's last rows: nothing stored runs on the device and no SASS can be built for
// it. A compile of the PTX of a lower arch when a toolkit builds one the driver loads;
// otherwise the miss, and why.
absl::StatusOr<ResolveDecision> NothingFits(ResolveDecision decision, const StoredLookup& lookup,
                                            const KernelId& id, const Device& device,
                                            const ResolvePolicy& policy, size_t tier_count,
                                            absl::Span<const Toolkit* const> toolkits) {
  if (!decision.record) {
    if (lookup.tiers_answered == 0 && tier_count > 0) {
      return WithMissReason(
          absl::UnavailableError(
              absl::StrCat("every store tier is failing (", lookup.first_failure.message(),
                           ") and the kernel's spec is unknown; retry shortly or send the spec")),
          MissReason::kNothingServable);
    }
    return WithMissReason(
        absl::NotFoundError(absl::StrCat("kernel ", id.ShortHex(),
                                         " is unknown (no store holds its spec) and no stored "
                                         "artifact of it runs on ",
                                         device.sm.ToString(),
                                         "; warm it with `kcache warm` or send its spec")),
        MissReason::kUnknownKernel);
  }
  std::string nothing = absl::StrCat("no stored artifact of ", decision.record->spec.name,
                                     " runs on ", device.sm.ToString());
  if (lookup.refused_min_driver != 0) {
    absl::StrAppend(&nothing, " with driver ", DriverText(device.driver), " (stored ones need ",
                    DriverText(lookup.refused_min_driver), " or newer)");
  }
  if (!policy.allow_compile) {
    return WithMissReason(
        absl::NotFoundError(
            absl::StrCat(nothing,
                         ", and compiling was not allowed (--no-compile, or a daemon started with "
                         "--no-toolkit); allow compiling or warm it with `kcache warm --arch ",
                         device.sm.ToString(), "`")),
        MissReason::kCompileNotAllowed);
  }
  if (toolkits.empty()) {
    return WithMissReason(absl::NotFoundError(absl::StrCat(
                              nothing,
                              ", and no toolkit is loaded to compile one; warm it with `kcache "
                              "warm --arch ",
                              device.sm.ToString(), "` or give a toolkit (--toolkit / CUDA_HOME)")),
                          MissReason::kNoToolkit);
  }
  bool some_toolkit_supports = false;
  for (const Toolkit* t : toolkits) some_toolkit_supports |= Supports(*t, device.sm.arch());
  if (!some_toolkit_supports) {
    if (std::optional<std::pair<size_t, int>> ptx = PtxFallback(toolkits, device)) {
      decision.compile =
          CompileJob{decision.record->spec,
                     decision.record->id,
                     Target{TargetKind::kPtx, SmFromArch(ptx->second), ArchVariant::kNone},
                     false,
                     {},
                     {}};
      decision.toolkit = ptx->first;
      decision.action = ResolveDecision::Action::kCompile;
      return decision;
    }
  }
  return NoToolkitFits(nothing, toolkits, device);
}

}  // namespace

absl::StatusOr<ResolveDecision> DecideResolve(StoreTiers& tiers, const KernelId& id,
                                              const KernelRecord* sent, const Device& device,
                                              const ResolvePolicy& policy,
                                              absl::Span<const Toolkit* const> toolkits) {
  absl::StatusOr<StoredLookup> lookup = LookupStored(tiers, id, device, policy.held);
  if (!lookup.ok()) return lookup.status();
  ResolveDecision decision;
  if (lookup->record) {
    decision.record = std::move(lookup->record);
  } else if (sent != nullptr) {
    if (absl::Status s = CheckArchRange(*sent, device); !s.ok()) return s;
    decision.record = *sent;
    decision.record->id = id;
  }
  if (lookup->hit) {
    decision.stored = std::move(lookup->hit);
    decision.stored_tier = lookup->hit_tier;
  }
  if (decision.stored && !decision.stored->needs_jit()) return decision;  // SASS: serve it

  std::optional<size_t> toolkit;
  if (decision.record && policy.allow_compile) {
    toolkit = PickToolkit(toolkits, device.driver, device.sm.arch());
  }
  if (toolkit) {
    decision.compile = CompileJobFor(*decision.record, device);
    decision.toolkit = *toolkit;
    decision.action = decision.stored && policy.ptx_now ? ResolveDecision::Action::kServeAndCompile
                                                        : ResolveDecision::Action::kCompile;
    return decision;
  }
  if (decision.stored) return decision;  // PTX, and nothing can build SASS: the driver JITs

  return NothingFits(std::move(decision), *lookup, id, device, policy, tiers.size(), toolkits);
}

ArtifactKind ServedKindOf(const CompileJob& job) {
  return job.target.kind == TargetKind::kSass ? ArtifactKind::kCubin : ArtifactKind::kPtx;
}

ServeRule CompiledRule(const CompileJob& job) {
  return job.target.kind == TargetKind::kSass ? ServeRule::kCompiled : ServeRule::kPtxJit;
}

std::string CompiledReason(const CompileJob& job, const ArtifactMeta& meta, const Device& device) {
  if (job.target.kind == TargetKind::kSass) return ServeReason(ServeRule::kCompiled, meta, device);
  return absl::StrCat("no loaded toolkit supports sm_", device.sm.arch(), "; compiled ",
                      job.target.ToString(), " PTX now and the driver must JIT it",
                      AssumedDriver(device, meta.min_driver));
}

absl::Status CompiledNothingServable(const CompileJob& job) {
  return WithMissReason(
      absl::InternalError(absl::StrCat("the compile for ", job.target.ToString(), " produced no ",
                                       ArtifactKindName(ServedKindOf(job)))),
      MissReason::kNothingServable);
}

absl::Status MissAfterFailedCompile(const ResolveDecision& decision, absl::Status failure) {
  bool compile_error = absl::IsAborted(failure);
  if (decision.stored && !compile_error) return absl::OkStatus();
  return WithMissReason(std::move(failure),
                        compile_error ? MissReason::kCompileError : MissReason::kNothingServable);
}

}  // namespace kcache
