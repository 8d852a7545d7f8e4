#include "client/lib/known_kernel_ids.h"

#include <deque>
#include <mutex>
#include <optional>

#include "absl/container/flat_hash_map.h"

namespace kcache::client {
namespace {

class KnownIds {
 public:
  void Remember(const KernelFingerprint& fingerprint, const KernelId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = ids_.insert_or_assign(fingerprint, id);
    if (!inserted) return;
    order_.push_back(fingerprint);
    if (order_.size() > kMaxKnownKernelIds) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
  }
  std::optional<KernelId> Find(const KernelFingerprint& fingerprint) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ids_.find(fingerprint);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

 private:
  // The C library's mutex, as FastPath's (fast_path.h): taken on a worker's start.
  mutable std::mutex mu_;
  absl::flat_hash_map<KernelFingerprint, KernelId> ids_;  // guarded by mu_
  std::deque<KernelFingerprint> order_;                   // guarded by mu_; oldest first
};

KnownIds& Known() {
  static KnownIds* known = new KnownIds;  // never destroyed: used until the process exits
  return *known;
}

}  // namespace

void RememberKernelId(const KernelSpec& spec, const KernelId& id) {
  Known().Remember(FingerprintKernel(spec), id);
}

KernelId KnownKernelId(const KernelSpec& spec) {
  KernelFingerprint fingerprint = FingerprintKernel(spec);
  if (std::optional<KernelId> id = Known().Find(fingerprint)) return *id;
  KernelId id = ComputeKernelId(spec);
  Known().Remember(fingerprint, id);
  return id;
}

}  // namespace kcache::client
