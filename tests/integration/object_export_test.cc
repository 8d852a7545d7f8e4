// `kcache export`: a running kcached's client-made objects (a launcher's object, Redis-door
// values) copied into a store directory that a new kcached bakes and serves as baked; only
// the namespaces asked for; many pages; clear errors for a daemon with nothing to export and
// for a directory that cannot be a store; a failed export leaves no store it created. Skips
// without c++ or redis-cli.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/objects/tiered_object_cache.h"
#include "engine/objects/named_object.h"
#include "tests/testutil/client_objects.h"

namespace kcache {
namespace {

using testing::DaemonProcess;
using testing::Outcome;
using testing::RunResult;

class ObjectExportTest : public testing::ClientObjectTest {
 protected:
  RunResult Export(DaemonProcess& from, const std::string& to, const std::string& more = "") {
    return testing::Run(absl::StrCat(testing::KcacheCli(), " export --server ", from.address(),
                                     " --to-store ", to, " ", more));
  }
};

TEST_F(ObjectExportTest, ExportedObjectsAreServedAsBakedByANewKcached) {
  DaemonProcess& pod = StartDaemon({});
  ASSERT_EQ(BuildThrough(pod, "b1"), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Door(pod, "SET pt2:graph fx-graph-bytes"), "OK");
  EXPECT_EQ(Door(pod, "SET triton:k1:kernel.cubin cubin-bytes"), "OK");

  RunResult exported = Export(pod, tmp_ / "baked");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(testing::Contains(exported.output, "exported 3 objects (1 objects, 1 pt2, 1 triton)"))
      << exported.output;

  DaemonProcess& next = StartDaemon({}, {tmp_ / "baked"});
  ASSERT_EQ(BuildThrough(next, "b2"), Outcome::kHit) << last_output_ << next.Log();
  EXPECT_EQ(Door(next, "GET pt2:graph"), "fx-graph-bytes");
  EXPECT_EQ(Door(next, "GET triton:k1:kernel.cubin"), "cubin-bytes");
  // Baked: a client cannot replace it.
  EXPECT_TRUE(testing::Contains(Door(next, "SET pt2:graph other"), "ERR")) << next.Log();
  EXPECT_EQ(Door(next, "GET pt2:graph"), "fx-graph-bytes");
}

TEST_F(ObjectExportTest, OnlyTheNamespacesAskedFor) {
  DaemonProcess& pod = StartDaemon({});
  ASSERT_EQ(BuildThrough(pod, "b1"), Outcome::kMiss) << last_output_;
  EXPECT_EQ(Door(pod, "SET pt2:graph fx-graph-bytes"), "OK");
  EXPECT_EQ(Door(pod, "SET triton:k1:kernel.cubin cubin-bytes"), "OK");

  RunResult exported = Export(pod, tmp_ / "baked", "--namespace pt2 --namespace objects");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(testing::Contains(exported.output, "exported 2 objects (1 objects, 1 pt2)"))
      << exported.output;
  DaemonProcess& next = StartDaemon({}, {tmp_ / "baked"});
  EXPECT_EQ(Door(next, "GET pt2:graph"), "fx-graph-bytes");
  EXPECT_EQ(Door(next, "GET triton:k1:kernel.cubin"), "");
}

TEST_F(ObjectExportTest, ManyPagesOfLongNamesAllArrive) {
  DaemonProcess& pod = StartDaemon({"--redis-key-max-bytes", "128KiB"});
  // 24 names of 96 KiB: about 4.5 MiB of listing, several 1 MiB pages.
  for (int i = 0; i < 24; ++i) {
    std::string name = absl::StrCat("pt2:", std::string(96 << 10, 'a' + i % 26), i);
    std::string file = tmp_.Write(absl::StrCat("name", i), name);
    EXPECT_EQ(Door(pod, absl::StrCat("SET \"$(cat ", file, ")\" value", i)), "OK");
  }
  RunResult exported = Export(pod, tmp_ / "baked");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(testing::Contains(exported.output, "exported 24 objects (24 pt2)"))
      << exported.output;
}

// A store that holds an entry whose key is larger than a gRPC message (stored before
// --redis-key-max-bytes) and more than a page of others: `kcache ls --server` pages through it
// and `kcache export` exports the others, both leaving that one out (counted).
TEST_F(ObjectExportTest, ListingsPageThroughAStoreWithAHugeKey) {
  DaemonProcess& pod = StartDaemon({});
  EXPECT_EQ(Door(pod, "SET pt2:graph fx-graph-bytes"), "OK");
  ASSERT_EQ(pod.Stop(), 0);
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(pod.store_path());
    ASSERT_TRUE(store.ok()) << store.status();
    std::unique_ptr<objects::ObjectCache> cache =
        objects::NewTieredObjectCache(store->get(), {}, uint64_t{64} << 20);
    ASSERT_TRUE(objects::PutNamedObject(*cache, "pt2:" + std::string(6 << 20, 'h'), "v").ok());
    for (int i = 0; i < 1500; ++i) {  // about 1.5 MiB of names: two pages and more
      std::string name = absl::StrCat("triton:", std::string(1000, 'n'), i);
      ASSERT_TRUE(objects::PutNamedObject(*cache, name, "cubin").ok());
    }
  }
  ASSERT_TRUE(pod.Start().ok()) << pod.Log();
  RunResult listed =
      testing::Run(absl::StrCat(testing::KcacheCli(), " ls --json --server ", pod.address()));
  ASSERT_EQ(listed.exit_code, 0) << listed.output.substr(0, 2000);
  nlohmann::json listing = nlohmann::json::parse(listed.output);
  ASSERT_EQ(listing.size(), 1501u);
  int named = 0;
  for (const nlohmann::json& element : listing) {
    std::string name = element["name"];
    EXPECT_LT(name.size(), 1100u);
    EXPECT_TRUE(element.contains("compiler_output")) << element.dump();
    if (name == "pt2:graph" || absl::StartsWith(name, "triton:")) ++named;
  }
  EXPECT_EQ(named, 1501);
  EXPECT_EQ(Counter(pod, "objects.listing_skipped"), 1);

  RunResult exported = Export(pod, tmp_ / "baked");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(testing::Contains(exported.output, "exported 1501 objects")) << exported.output;
  EXPECT_EQ(Counter(pod, "objects.listing_skipped"), 2);
  EXPECT_EQ(Door(pod, "GET pt2:graph"), "fx-graph-bytes");
}

TEST_F(ObjectExportTest, NothingToExportIsAnErrorAndLeavesNoStore) {
  DaemonProcess& pod = StartDaemon({});
  RunResult exported = Export(pod, tmp_ / "baked");
  EXPECT_EQ(exported.exit_code, 1) << exported.output;
  EXPECT_TRUE(testing::Contains(exported.output, "has no client-made objects")) << exported.output;
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "baked"));  // nothing to bake by mistake

  EXPECT_EQ(Door(pod, "SET pt2:graph fx-graph-bytes"), "OK");
  exported = Export(pod, tmp_ / "baked2", "--namespace triton");
  EXPECT_EQ(exported.exit_code, 1) << exported.output;
  EXPECT_TRUE(testing::Contains(exported.output, "no client-made objects in triton"))
      << exported.output;
}

TEST_F(ObjectExportTest, ADaemonOutOfReachIsAnErrorAndLeavesNoStore) {
  DaemonProcess& pod = StartDaemon({});
  EXPECT_EQ(Door(pod, "SET pt2:graph fx-graph-bytes"), "OK");
  pod.Stop();
  RunResult exported = Export(pod, tmp_ / "baked");
  EXPECT_NE(exported.exit_code, 0) << exported.output;
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "baked")) << exported.output;
  // A store that was there before stays, whatever happened.
  ASSERT_TRUE(std::filesystem::create_directories(tmp_ / "kept"));
  exported = Export(pod, tmp_ / "kept");
  EXPECT_NE(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(std::filesystem::exists(tmp_ / "kept"));
}

TEST_F(ObjectExportTest, AnUnusableDirectoryIsABadInput) {
  DaemonProcess& pod = StartDaemon({});
  EXPECT_EQ(Door(pod, "SET pt2:graph fx-graph-bytes"), "OK");
  RunResult exported = Export(pod, tmp_.Write("a-file", "not a directory"));
  EXPECT_EQ(exported.exit_code, 2) << exported.output;
  EXPECT_TRUE(testing::Contains(exported.output, "--to-store")) << exported.output;
  // The daemon's own store: RocksDB's lock says no.
  exported = Export(pod, pod.options().store);
  EXPECT_EQ(exported.exit_code, 2) << exported.output;
}

}  // namespace
}  // namespace kcache
