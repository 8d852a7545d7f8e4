#include "engine/resolve/in_process.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/target.h"
#include "engine/store/store.h"

namespace kcache {
namespace {

// No tiers at all: libkcache's local fallback has only the spec it was given.
class NoTiers : public StoreTiers {
 public:
  size_t size() const override { return 0; }
  absl::StatusOr<KernelRecord> GetKernel(size_t, const KernelId&) override {
    return absl::NotFoundError("no store");
  }
  absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(size_t, const KernelId&) override {
    return absl::NotFoundError("no store");
  }
  absl::StatusOr<Artifact> Get(size_t, const ArtifactKey&) override {
    return absl::NotFoundError("no store");
  }
};

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

}  // namespace

absl::StatusOr<InProcessAnswer> ResolveInProcess(StoreTiers& tiers, Store* write_to,
                                                 const KernelId& id, const KernelRecord* sent,
                                                 const Device& device, const ResolvePolicy& policy,
                                                 absl::Span<Compiler* const> compilers) {
  // The entry of callers with no daemon's edge in front: the device is checked here, once.
  if (absl::Status s = ValidateDeviceSm(device.sm.major, device.sm.minor); !s.ok()) return s;
  std::vector<const Toolkit*> toolkits;
  for (Compiler* c : compilers) toolkits.push_back(&c->toolkit());
  absl::StatusOr<ResolveDecision> decision =
      DecideResolve(tiers, id, sent, device, policy, toolkits);
  if (!decision.ok()) return decision.status();
  if (decision->action == ResolveDecision::Action::kServe) {
    return InProcessAnswer{*std::move(decision->stored), {}};
  }

  const CompileJob& job = *decision->compile;
  absl::StatusOr<CompileOutput> output = compilers[decision->toolkit]->Compile(job);
  if (!output.ok()) {
    absl::Status miss = MissAfterFailedCompile(*decision, output.status());
    if (!miss.ok()) return miss;
    return InProcessAnswer{*std::move(decision->stored), {}};
  }
  absl::Status written;
  if (write_to != nullptr) {
    for (const Artifact& artifact : output->artifacts) {
      if (absl::Status s = write_to->Put(artifact); !s.ok() && written.ok()) written = s;
    }
  }
  if (decision->action == ResolveDecision::Action::kServeAndCompile) {
    return InProcessAnswer{*std::move(decision->stored), written};
  }
  for (Artifact& artifact : output->artifacts) {
    if (artifact.meta.key.kind != ServedKindOf(job) || artifact.meta.key.target != job.target) {
      continue;
    }
    std::string reason = CompiledReason(job, artifact.meta, device);
    return InProcessAnswer{{std::make_shared<const Artifact>(std::move(artifact)),
                            CompiledRule(job), std::move(reason)},
                           written};
  }
  return CompiledNothingServable(job);
}

absl::StatusOr<InProcessAnswer> ResolveFromStore(Store& store, const KernelId& id,
                                                 const Device& device, const ResolvePolicy& policy,
                                                 absl::Span<Compiler* const> compilers) {
  OneStore tiers(store);
  return ResolveInProcess(tiers, &store, id, nullptr, device, policy, compilers);
}

absl::StatusOr<InProcessAnswer> ResolveSpecInProcess(const KernelRecord& spec, const Device& device,
                                                     const ResolvePolicy& policy,
                                                     absl::Span<Compiler* const> compilers) {
  NoTiers none;
  return ResolveInProcess(none, nullptr, spec.id, &spec, device, policy, compilers);
}

}  // namespace kcache
