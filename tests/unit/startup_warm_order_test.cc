// WarmFromStores (daemon/cache/startup_warm.h) over real RocksDB stores in temp dirs: most
// recently used first, within the budget, an artifact two tiers hold read once from the upper
// one, LTO-IR left out, the bytes handed on as stored.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/cache/startup_warm.h"
#include "daemon/cache/statistics.h"
#include "engine/store/store.h"
#include "tests/testutil/synthetic.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

// An artifact of `size` bytes for `target` of a kernel of its own, last used at `used`.
Artifact Make(const std::string& name, const std::string& target, size_t size, int64_t used) {
  KernelRecord record = testing::Record(name, "// " + name);
  Artifact a;
  a.meta.key.kernel_id = record.id;
  a.meta.key.target = *ParseTarget(target);
  a.meta.key.kind = target.rfind("compute_", 0) == 0 ? ArtifactKind::kPtx : ArtifactKind::kCubin;
  a.meta.key.toolkit = testing::kFakeToolkit;
  a.meta.created_unix_ms = used;
  a.meta.last_used_unix_ms = used;
  a.bytes.assign(size, name[0]);
  return a;
}

class StartupWarmOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    local_ = *OpenStore(dir_ / "local", options);
    baked_ = *OpenStore(dir_ / "baked", options);
  }
  // The tiers, once the stores hold what the test put (the baked one reopened read-only).
  std::vector<std::string> Warm(uint64_t budget) {
    StoreOptions read_only;
    read_only.read_only = true;
    baked_.reset();
    baked_ = *OpenStore(dir_ / "baked", read_only);
    HealthCheckedTiers tiers(local_.get(), {baked_.get()}, absl::Seconds(5), absl::Minutes(1),
                             &stats_);
    std::vector<std::string> order;
    StartupWarmResult result = WarmFromStores(
        tiers, budget,
        [&](std::shared_ptr<const Artifact> a) {
          order.push_back(a->meta.kernel_name + ":" + a->bytes);
        },
        nullptr);
    EXPECT_EQ(result.artifacts, order.size());
    return order;
  }
  void Put(Store& store, Artifact a, const std::string& name) {
    a.meta.kernel_name = name;
    ASSERT_TRUE(store.Put(a).ok());
  }

  testing::TempDir dir_;
  Statistics stats_;
  std::unique_ptr<Store> local_, baked_;
};

TEST_F(StartupWarmOrderTest, MostRecentlyUsedFirstWithinTheBudget) {
  Put(*local_, Make("a", "sm_89", 3, 1000), "a");
  Put(*baked_, Make("b", "sm_86", 3, 3000), "b");
  Put(*local_, Make("c", "compute_75", 3, 2000), "c");
  Put(*baked_, Make("d", "sm_90", 3, 500), "d");
  EXPECT_EQ(Warm(100), (std::vector<std::string>{"b:bbb", "c:ccc", "a:aaa", "d:ddd"}));
  EXPECT_EQ(Warm(6), (std::vector<std::string>{"b:bbb", "c:ccc"}));
  EXPECT_TRUE(Warm(0).empty());
}

TEST_F(StartupWarmOrderTest, SkipsWhatDoesNotFitForWhatDoes) {
  Put(*local_, Make("a", "sm_89", 10, 3000), "a");
  Put(*local_, Make("b", "sm_89", 2, 2000), "b");
  EXPECT_EQ(Warm(5), (std::vector<std::string>{"b:bb"}));
}

TEST_F(StartupWarmOrderTest, ReadsAnArtifactOfTwoTiersOnceFromTheUpperOne) {
  Artifact a = Make("a", "sm_89", 3, 1000);
  Put(*baked_, a, "baked");
  Put(*local_, a, "local");
  EXPECT_EQ(Warm(100), (std::vector<std::string>{"local:aaa"}));
}

TEST_F(StartupWarmOrderTest, LeavesLtoirOut) {
  Artifact lto = Make("l", "sm_89", 3, 1000);
  lto.meta.key.kind = ArtifactKind::kLtoir;
  Put(*local_, lto, "l");
  EXPECT_TRUE(Warm(100).empty());
}

}  // namespace
}  // namespace kcache
