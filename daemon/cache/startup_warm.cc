#include "daemon/cache/startup_warm.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace kcache {
namespace {

struct Candidate {
  ArtifactMeta meta;
  size_t tier = 0;
};

// Every servable artifact of every tier, most recently used first; an artifact several tiers
// hold comes from the upper one (the one a resolve reads first).
std::vector<Candidate> Candidates(HealthCheckedTiers& tiers) {
  std::vector<Candidate> out;
  absl::flat_hash_set<std::string> seen;
  for (size_t t = 0; t < tiers.size(); ++t) {
    absl::StatusOr<std::vector<ArtifactMeta>> metas = tiers.ListAllArtifacts(t);
    if (!metas.ok()) continue;
    for (ArtifactMeta& meta : *metas) {
      if (meta.key.kind == ArtifactKind::kLtoir) continue;  // never served to a worker
      if (!seen.insert(meta.key.Encode()).second) continue;
      out.push_back(Candidate{std::move(meta), t});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return a.meta.last_used_unix_ms > b.meta.last_used_unix_ms;
  });
  return out;
}

}  // namespace

StartupWarmResult WarmFromStores(HealthCheckedTiers& tiers, uint64_t budget_bytes,
                                 const std::function<void(std::shared_ptr<const Artifact>)>& each,
                                 const std::function<bool()>& keep_going) {
  StartupWarmResult result;
  if (budget_bytes == 0) return result;
  absl::flat_hash_set<std::string> kernels_read;  // (tier, kernel id) whose record was read
  for (const Candidate& c : Candidates(tiers)) {
    if (keep_going && !keep_going()) break;
    if (c.meta.size > budget_bytes - result.bytes) continue;  // a smaller one may still fit
    const KernelId& id = c.meta.key.kernel_id;
    if (kernels_read.insert(std::string(1, static_cast<char>(c.tier)) + std::string(id.Bytes()))
            .second) {
      tiers.GetKernel(c.tier, id).IgnoreError();
      tiers.ListArtifacts(c.tier, id).IgnoreError();
    }
    absl::StatusOr<Artifact> artifact = tiers.Get(c.tier, c.meta.key);
    if (!artifact.ok()) continue;  // corrupt (counted and dropped by the store) or failing
    result.bytes += artifact->bytes.size();
    ++result.artifacts;
    if (each) each(std::make_shared<const Artifact>(*std::move(artifact)));
  }
  return result;
}

}  // namespace kcache
