// kcached with a damaged or bounded writable store, and `kcache doctor --repair`, for real:
// a kcached process on a temp socket, stores damaged on disk before it starts.
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/store/store.h"
#include "gtest/gtest.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/run.h"
#include "tests/testutil/store_artifacts.h"
#include "tests/testutil/store_faults.h"
#include "tests/testutil/synthetic.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using ::kcache::testing::CallResolve;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::FileIn;
using ::kcache::testing::FlipBit;
using ::kcache::testing::PutSynthetic;
using ::kcache::testing::Record;
using ::kcache::testing::ResolveOutcome;
using ::kcache::testing::StatCounter;
using ::kcache::testing::TestPayload;
using ::kcache::testing::WaitFor;

v1::ResolveRequest ByName(const std::string& name) {
  v1::ResolveRequest request;
  request.set_kernel_name(name);
  request.mutable_device()->set_sm_major(8);
  request.mutable_device()->set_sm_minor(9);
  return request;
}

class DaemonStoreFaultsTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> flags) {
    flags.push_back("--no-toolkit");
    // Store hits, not the start-up warm's memory answers: the stores are what is tested.
    flags.insert(flags.end(), {"--warm-start-max-bytes", "0"});
    daemon_.options().extra_flags = std::move(flags);
    absl::Status started = daemon_.Start();
    ASSERT_TRUE(started.ok()) << started << daemon_.Log();
    stub_ = ::kcache::testing::NewStub(daemon_.address());
  }
  // Fills the store at `path` with kernels `names`, each an sm_89 cubin of `size` bytes.
  void Fill(const std::string& path, const std::vector<std::string>& names, size_t size) {
    auto store = OpenStore(path);
    ASSERT_TRUE(store.ok()) << store.status();
    for (size_t i = 0; i < names.size(); ++i) {
      PutSynthetic(**store, Record(names[i], "// " + names[i] + "\n"), "sm_89",
                   TestPayload(size, i + 1));
    }
  }

  ::kcache::testing::TempDir dir_;
  DaemonProcess daemon_;
  std::unique_ptr<v1::KernelCache::Stub> stub_;
};

TEST_F(DaemonStoreFaultsTest, UnopenableWritableStoreIsReplacedAndTheBakedStoreServes) {
  Fill(daemon_.store_path(), {"local"}, 100);
  Fill(dir_ / "baked", {"baked"}, 100);
  std::string manifest = FileIn(daemon_.store_path(), "MANIFEST-");
  FlipBit(manifest, static_cast<int64_t>(fs::file_size(manifest) / 2));
  daemon_.options().baked = {dir_ / "baked"};
  StartDaemon({});

  ResolveOutcome out = CallResolve(*stub_, ByName("baked"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message() << daemon_.Log();
  EXPECT_EQ(out.header.tier(), v1::TIER_BAKED_STORE);
  EXPECT_EQ(StatCounter(*stub_, "store.replaced_damaged"), 1u);
  EXPECT_NE(daemon_.Log().find("moved it aside"), std::string::npos) << daemon_.Log();
  EXPECT_FALSE(FileIn(daemon_.store_path(), ".kcache-damaged-").empty());
}

// A baked store that does not open (a damaged MANIFEST) is left out, loudly: kcached starts
// and serves from the other stores, logs what to do, counts it (`kcache stat`), and never
// writes into or moves the image's store.
TEST_F(DaemonStoreFaultsTest, DamagedBakedStoreIsLeftOutAndTheOthersServe) {
  Fill(dir_ / "damaged", {"lost"}, 100);
  Fill(dir_ / "good", {"kept"}, 100);
  std::string manifest = FileIn(dir_ / "damaged", "MANIFEST-");
  FlipBit(manifest, static_cast<int64_t>(fs::file_size(manifest) / 2));
  daemon_.options().baked = {dir_ / "damaged", dir_ / "good"};
  StartDaemon({});

  ResolveOutcome kept = CallResolve(*stub_, ByName("kept"));
  ASSERT_TRUE(kept.status.ok()) << kept.status.error_message() << daemon_.Log();
  EXPECT_EQ(kept.header.tier(), v1::TIER_BAKED_STORE);
  EXPECT_EQ(CallResolve(*stub_, ByName("lost")).status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(StatCounter(*stub_, "store.baked_skipped_damaged"), 1u);
  EXPECT_NE(daemon_.Log().find("is damaged and kcached serves WITHOUT it"), std::string::npos)
      << daemon_.Log();
  EXPECT_TRUE(FileIn(dir_ / "damaged", ".kcache-damaged-").empty()) << "a baked store is not moved";
  ::kcache::testing::RunResult stat = ::kcache::testing::Run(::kcache::testing::KcacheCli() +
                                                             " stat --server " + daemon_.address());
  EXPECT_NE(stat.output.find("store.baked_skipped_damaged"), std::string::npos) << stat.output;
}

TEST_F(DaemonStoreFaultsTest, MissingBlobFileIsAMissForItsKernelNotAFailingStore) {
  Fill(daemon_.store_path(), {"big", "small"}, 0);  // names first: ids are per name
  {
    auto store = OpenStore(daemon_.store_path());
    ASSERT_TRUE(store.ok());
    PutSynthetic(**store, Record("big", "// big\n"), "sm_89", TestPayload(20000, 9));
  }
  fs::remove(FileIn(daemon_.store_path(), "", ".blob"));
  StartDaemon({});

  ResolveOutcome big = CallResolve(*stub_, ByName("big"));
  EXPECT_EQ(big.status.error_code(), grpc::StatusCode::NOT_FOUND) << big.status.error_message();
  for (int i = 0; i < 3; ++i) {
    ResolveOutcome small = CallResolve(*stub_, ByName("small"));
    ASSERT_TRUE(small.status.ok()) << small.status.error_message() << daemon_.Log();
    EXPECT_EQ(small.header.tier(), i == 0 ? v1::TIER_LOCAL_STORE : v1::TIER_MEMORY);
  }
  EXPECT_EQ(StatCounter(*stub_, "tier.switched_off"), 0u);
  EXPECT_GE(StatCounter(*stub_, "store.checksum_failures"), 1u);
  EXPECT_NE(daemon_.Log().find("was corrupt"), std::string::npos) << daemon_.Log();
}

TEST_F(DaemonStoreFaultsTest, WritableStoreStaysWithinStoreMaxBytesAndCountsEvictions) {
  std::vector<std::string> names = {"k1", "k2", "k3", "k4", "k5", "k6"};
  Fill(dir_ / "baked", names, 20000);
  daemon_.options().baked = {dir_ / "baked"};
  StartDaemon({"--store-max-bytes", "50000"});
  for (const std::string& name : names) {  // each baked hit is written back to the store
    ResolveOutcome out = CallResolve(*stub_, ByName(name));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  }
  // The write-backs run after the answers, on kcached's writer thread: wait for all six.
  WaitFor([&] { return StatCounter(*stub_, "tier.write_backs") >= names.size(); });
  ASSERT_EQ(StatCounter(*stub_, "tier.write_backs"), names.size()) << daemon_.Log();
  EXPECT_GE(StatCounter(*stub_, "store.evictions"), 3u);
  EXPECT_GE(StatCounter(*stub_, "store.evicted_bytes"), 60000u);
  ASSERT_EQ(daemon_.Stop(), 0) << daemon_.Log();
  auto store = OpenStore(daemon_.store_path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_LE((*store)->Stats()->artifact_bytes, 50000u);
}

TEST_F(DaemonStoreFaultsTest, DoctorRepairRepairsAnOfflineStore) {
  std::string path = dir_ / "store";
  Fill(path, {"a", "b", "c"}, 20000);
  FlipBit(FileIn(path, "", ".blob"), 30000);
  ::kcache::testing::RunResult r = ::kcache::testing::Run(
      ::kcache::testing::KcacheCli() + " doctor --json --repair --store " + path);
  nlohmann::json doc = nlohmann::json::parse(r.output.substr(r.output.find('{')), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.output;
  bool found = false;
  for (const nlohmann::json& check : doc["checks"]) {
    if (check["check"] != "store") continue;
    found = true;
    EXPECT_TRUE(check["ok"].get<bool>()) << check.dump(2);
    EXPECT_EQ(check["details"]["repair"]["dropped"], 1) << check.dump(2);
    EXPECT_EQ(check["details"]["artifacts"], 2) << check.dump(2);
    EXPECT_TRUE(check["details"]["corrupt"].empty()) << check.dump(2);
  }
  EXPECT_TRUE(found) << r.output;
}

}  // namespace
}  // namespace kcache
