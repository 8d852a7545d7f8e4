#include "engine/warm/warm.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/options_util.h>

#include "core/manifest.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/store/store.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/toolkit.h"

namespace kcache {
namespace {

using ::kcache::testing::TempDir;

class WarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::shared_ptr<const Toolkit>>& toolkit =
        ::kcache::testing::SharedToolkit();
    ASSERT_TRUE(toolkit.ok()) << toolkit.status();
    compiler_ = NewNvrtcCompiler(*toolkit);
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(dir_ / "store");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    ::kcache::testing::WriteTestKernelFiles(dir_);
  }

  Manifest LoadOrDie(const std::string& yaml) {
    absl::StatusOr<Manifest> m = LoadManifest(dir_.Write("manifest.yaml", yaml));
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : Manifest{};
  }

  WarmSummary WarmOrDie(const Manifest& m, const std::string& arch) {
    absl::StatusOr<WarmSummary> s =
        Warm(m, WarmOptions{*ParseTargetList(arch), 2}, *store_, *compiler_, nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : WarmSummary{};
  }

  TempDir dir_;
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<Store> store_;
};

constexpr char kTwoKernels[] = R"(version: 1
kernels:
  - name: saxpy
    source: saxpy.cu
  - name: scale
    source: scale.cu
    headers: [scale.cuh]
    name_expressions: ["scale<float>", "scale<int>"]
    min_arch: 8.0
)";

TEST_F(WarmTest, BuildsEveryTargetAndSkipsBelowMinArch) {
  Manifest m = LoadOrDie(kTwoKernels);
  WarmSummary s = WarmOrDie(m, "7.5,8.6");
  EXPECT_EQ(s.built, 3);    // saxpy x2, scale x1
  EXPECT_EQ(s.skipped, 1);  // scale for 7.5: below its min_arch 8.0
  EXPECT_EQ(s.failed, 0);
  EXPECT_TRUE(s.ok());
  for (const WarmJobResult& r : s.results) {
    if (r.outcome == WarmOutcome::kSkipped) {
      EXPECT_EQ(r.job.kernel->record.spec.name, "scale");
      EXPECT_NE(r.message.find("min_arch 8.0"), std::string::npos) << r.message;
    }
  }
  // A cubin and a PTX per built job, and the kernel records so misses can compile later.
  absl::StatusOr<std::vector<ArtifactMeta>> saxpy = store_->ListArtifacts(m.kernels[0].record.id);
  ASSERT_TRUE(saxpy.ok());
  EXPECT_EQ(saxpy->size(), 4u);
  absl::StatusOr<KernelRecord> record = store_->GetKernel(m.kernels[1].record.id);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->spec.name_expressions.size(), 2u);
}

TEST_F(WarmTest, SecondWarmCompilesNothing) {
  Manifest m = LoadOrDie(kTwoKernels);
  WarmOrDie(m, "7.5,8.6");
  WarmSummary again = WarmOrDie(m, "7.5,8.6");
  EXPECT_EQ(again.built, 0);
  EXPECT_EQ(again.cached, 3);
  EXPECT_EQ(again.skipped, 1);
  // A new target in the list compiles only that target.
  WarmSummary wider = WarmOrDie(m, "7.5,8.6,8.9");
  EXPECT_EQ(wider.built, 2);
  EXPECT_EQ(wider.cached, 3);
}

// Deletes the listing entry of `key` from the closed store at `path`, as lost damage would.
void DeleteListingEntry(const std::string& path, const ArtifactKey& key) {
  rocksdb::ConfigOptions config;
  rocksdb::DBOptions options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  ASSERT_TRUE(rocksdb::LoadLatestOptions(config, path, &options, &families).ok());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, families, &handles, &db).ok());
  for (auto* handle : handles) {
    if (handle->GetName() == "artifact_meta") {
      EXPECT_TRUE(db->Delete(rocksdb::WriteOptions(), handle, key.Encode()).ok());
    }
    db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  delete db;
}

TEST_F(WarmTest, RewarmRebuildsALostListingEntryOfAnIntactArtifact) {
  Manifest m = LoadOrDie(kTwoKernels);
  WarmOrDie(m, "8.6");
  const KernelId& saxpy = m.kernels[0].record.id;
  ArtifactKey lost = store_->ListArtifacts(saxpy)->front().key;
  store_.reset();
  DeleteListingEntry(dir_ / "store", lost);
  store_ = *OpenStore(dir_ / "store");
  EXPECT_EQ(store_->ListArtifacts(saxpy)->size(), 1u);  // invisible to resolves

  WarmSummary again = WarmOrDie(m, "8.6");
  EXPECT_EQ(again.built, 0);
  bool rebuilt = false;
  for (const WarmJobResult& r : again.results) rebuilt |= r.message == "listing entries rebuilt";
  EXPECT_TRUE(rebuilt);
  EXPECT_EQ(store_->ListArtifacts(saxpy)->size(), 2u);
}

TEST_F(WarmTest, CompileErrorFailsThatJobWithTheLogAndOthersStillBuild) {
  Manifest m = LoadOrDie(R"(version: 1
kernels:
  - name: broken
    source: broken.cu
  - name: saxpy
    source: saxpy.cu
)");
  WarmSummary s = WarmOrDie(m, "8.6");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.built, 1);
  for (const WarmJobResult& r : s.results) {
    if (r.outcome != WarmOutcome::kFailed) continue;
    EXPECT_EQ(r.job.kernel->record.spec.name, "broken");
    EXPECT_NE(r.message.find("undeclared_identifier"), std::string::npos) << r.message;
  }
}

TEST_F(WarmTest, PlanPutsLongestExpectedFirst) {
  Manifest m = LoadOrDie(R"(version: 1
kernels:
  - name: quick
    source: saxpy.cu
    cost: 10
  - name: slow
    source: scale.cu
    headers: [scale.cuh]
    name_expressions: ["scale<float>"]
    cost: 5000
)");
  std::vector<WarmJob> jobs = PlanWarm(m, *ParseTargetList("7.5,8.6"), *store_);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].kernel->record.spec.name, "slow");
  EXPECT_EQ(jobs[1].kernel->record.spec.name, "slow");
  EXPECT_EQ(jobs[3].kernel->record.spec.name, "quick");
}

TEST_F(WarmTest, LtoirIsBuiltWhenAsked) {
  Manifest m = LoadOrDie(R"(version: 1
kernels:
  - name: saxpy
    source: saxpy.cu
    ltoir: true
)");
  WarmSummary s = WarmOrDie(m, "8.6");
  ASSERT_EQ(s.built, 1);
  absl::StatusOr<std::vector<ArtifactMeta>> metas = store_->ListArtifacts(m.kernels[0].record.id);
  ASSERT_TRUE(metas.ok());
  int ltoir = 0;
  for (const ArtifactMeta& meta : *metas) ltoir += meta.key.kind == ArtifactKind::kLtoir;
  EXPECT_EQ(ltoir, 1);
}

}  // namespace
}  // namespace kcache
