// FailingStore: a Store decorator that fails on demand, for fault-injection tests only (the
// habit of LevelDB's SpecialEnv). It owns the real store it wraps; while failing, every call
// answers Unavailable without reaching it.
#ifndef KCACHE_TESTS_TESTUTIL_FAILING_STORE_H_
#define KCACHE_TESTS_TESTUTIL_FAILING_STORE_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/store/store.h"

namespace kcache::testing {

class FailingStore : public Store {
 public:
  explicit FailingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

  void set_failing(bool failing) { failing_ = failing; }
  // Calls that reached this decorator (failed or not), since creation.
  int calls() const { return calls_; }

  absl::StatusOr<Artifact> Get(const ArtifactKey& key) override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->Get(key);
  }
  absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(const KernelId& id) override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->ListArtifacts(id);
  }
  absl::StatusOr<std::vector<ArtifactMeta>> ListAllArtifacts() override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->ListAllArtifacts();
  }
  absl::Status Put(const Artifact& artifact) override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->Put(artifact);
  }
  absl::Status PutKernel(const KernelRecord& record) override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->PutKernel(record);
  }
  absl::StatusOr<KernelRecord> GetKernel(const KernelId& id) override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->GetKernel(id);
  }
  absl::StatusOr<std::vector<KernelRecord>> ListKernels() override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->ListKernels();
  }
  absl::StatusOr<StoreStats> Stats() override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->Stats();
  }
  absl::StatusOr<StoreVerifyReport> Verify() override {
    if (absl::Status s = Enter(); !s.ok()) return s;
    return inner_->Verify();
  }
  const std::string& path() const override { return inner_->path(); }

 private:
  absl::Status Enter() {
    ++calls_;
    if (!failing_) return absl::OkStatus();
    return absl::UnavailableError("injected failure (FailingStore)");
  }

  std::unique_ptr<Store> inner_;
  std::atomic<bool> failing_{false};
  std::atomic<int> calls_{0};
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_FAILING_STORE_H_
