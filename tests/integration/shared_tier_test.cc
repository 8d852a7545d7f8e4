// kcached's shared tier end to end: real kcached processes sharing a real six-node Redis
// Cluster on loopback. What one daemon compiles another fetches instead of compiling; an
// entry written without the key, flipped or truncated is rejected, counted, never served
// and replaced; two keys during a rotation; a paused cluster never fails a request; big
// artifacts stay local. Skips without redis-server and redis-cli.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/shared/redis_cluster.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/redis_cluster.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::CallResolve;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::ResolveOutcome;
using ::kcache::testing::ResolveSpec;
using ::kcache::testing::StatCounter;
using ::kcache::testing::WireSpec;

const std::string kKeyA = "first-shared-key-of-at-least-32-bytes";
const std::string kKeyB = "second-shared-key-of-at-least-32-bytes";

class SharedTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RedisAvailable()) GTEST_SKIP() << "redis-server or redis-cli missing";
    ASSERT_TRUE(cluster_.StartCluster()) << cluster_.error();
    key_a_ = dir_.Write("a.key", kKeyA + "\n");
    key_b_ = dir_.Write("b.key", kKeyB);
  }

  // A kcached on the cluster with an empty store; `flags` after --shared URL.
  DaemonProcess& StartDaemon(std::vector<std::string> flags) {
    auto daemon = std::make_unique<DaemonProcess>();
    std::vector<std::string> all = {"--shared", cluster_.Url()};
    all.insert(all.end(), flags.begin(), flags.end());
    daemon->options().extra_flags = all;
    absl::Status started = daemon->Start();
    EXPECT_TRUE(started.ok()) << started;
    daemons_.push_back(std::move(daemon));
    stubs_.push_back(testing::NewStub(daemons_.back()->address()));
    return *daemons_.back();
  }
  v1::KernelCache::Stub& Stub(size_t i) { return *stubs_[i]; }

  static v1::ResolveRequest Saxpy() {
    return ResolveSpec(WireSpec("saxpy", testing::kSaxpySource), 8, 6);
  }

  // Waits (up to 30 s) until daemon i counts `at_least` in counter `name`.
  bool WaitCounter(size_t i, const std::string& name, uint64_t at_least) {
    for (int tries = 0; tries < 300; ++tries) {
      uint64_t value = StatCounter(Stub(i), name);
      if (value != UINT64_MAX && value >= at_least) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // The Redis keys of every shared-tier entry (KEYS on every node); `suffix` "lease" for the
  // leases.
  std::vector<std::string> EntryKeys(const std::string& suffix = "a") {
    std::vector<std::string> keys;
    std::istringstream lines(
        testing::Run(absl::StrCat("redis-cli --cluster call 127.0.0.1:", cluster_.ports()[0],
                                  " KEYS 'kcache:v1:*:", suffix, "'"))
            .output);
    std::string line;
    while (std::getline(lines, line)) {
      size_t at = line.find("kcache:v1:");
      if (at == std::string::npos || line.find('*') != std::string::npos) continue;
      std::string key = line.substr(at);
      while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
      keys.push_back(key);
    }
    return keys;
  }

  std::string Cli(const std::string& args) {
    return testing::Run(absl::StrCat("redis-cli -c -p ", cluster_.ports()[0], " ", args)).output;
  }

  testing::RedisServers cluster_;
  testing::TempDir dir_;
  std::string key_a_, key_b_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::vector<std::unique_ptr<v1::KernelCache::Stub>> stubs_;
};

TEST_F(SharedTierTest, WhatOneDaemonCompiledAnotherFetchesInsteadOfCompiling) {
  StartDaemon({"--shared-key-file", key_a_});
  ResolveOutcome compiled = CallResolve(Stub(0), Saxpy());
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.error_message() << daemons_[0]->Log();
  EXPECT_EQ(compiled.header.tier(), v1::TIER_COMPILE);
  ASSERT_TRUE(WaitCounter(0, "shared.writes", 2)) << daemons_[0]->Log();  // cubin and PTX
  EXPECT_EQ(EntryKeys().size(), 2u);

  StartDaemon({"--shared-key-file", key_a_});
  ResolveOutcome fetched = CallResolve(Stub(1), Saxpy());
  ASSERT_TRUE(fetched.status.ok()) << fetched.status.error_message() << daemons_[1]->Log();
  EXPECT_EQ(fetched.header.tier(), v1::TIER_SHARED);
  EXPECT_EQ(fetched.bytes, compiled.bytes);
  EXPECT_EQ(StatCounter(Stub(1), "compile.runs"), 0u);
  EXPECT_EQ(StatCounter(Stub(1), "resolve.hit.shared"), 1u);
  EXPECT_EQ(StatCounter(Stub(1), "shared.hits"), 2u);
  // Written back: the next resolve is the daemon's own (memory), not the shared tier's.
  ResolveOutcome again = CallResolve(Stub(1), Saxpy());
  EXPECT_EQ(again.header.tier(), v1::TIER_MEMORY);
  EXPECT_EQ(StatCounter(Stub(1), "shared.hits"), 2u);
}

TEST_F(SharedTierTest, BadEntriesAreRejectedCountedNeverServedAndReplaced) {
  StartDaemon({"--shared-key-file", key_a_});
  ResolveOutcome compiled = CallResolve(Stub(0), Saxpy());
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.error_message();
  ASSERT_TRUE(WaitCounter(0, "shared.writes", 2));
  std::vector<std::string> keys = EntryKeys();
  ASSERT_EQ(keys.size(), 2u);
  absl::StatusOr<std::unique_ptr<RedisCluster>> redis = RedisCluster::Create(cluster_.Url());
  ASSERT_TRUE(redis.ok());
  std::string good = **(*redis)->Get(keys[0]);

  // Three bad values in turn, each met by a fresh daemon: a flipped byte (redis-cli
  // SETRANGE), a value written by someone without the key, a truncated entry.
  const std::vector<std::string> faults = {"flipped", "unsigned", "truncated"};
  for (size_t f = 0; f < faults.size(); ++f) {
    SCOPED_TRACE(faults[f]);
    for (const std::string& key : keys) {
      std::string value = **(*redis)->Get(key);
      if (faults[f] == "flipped") {
        const char* other = value[60] == 'A' ? "B" : "A";  // one byte changed
        Cli(absl::StrCat("SETRANGE '", key, "' 60 ", other));
      } else if (faults[f] == "unsigned") {
        Cli(absl::StrCat("SET '", key, "' 'KCSE-not-signed-by-a-daemon'"));
      } else {
        ASSERT_TRUE((*redis)->Set(key, value.substr(0, value.size() / 2)).ok());
      }
      ASSERT_NE(**(*redis)->Get(key), value);
    }
    size_t d = daemons_.size();
    StartDaemon({"--shared-key-file", key_a_});
    ResolveOutcome out = CallResolve(Stub(d), Saxpy());
    ASSERT_TRUE(out.status.ok()) << out.status.error_message() << daemons_[d]->Log();
    EXPECT_EQ(out.header.tier(), v1::TIER_COMPILE);  // compiled: the bad entry never served
    EXPECT_EQ(StatCounter(Stub(d), "shared.rejected"), 1u);
    EXPECT_TRUE(testing::Contains(daemons_[d]->Log(), "rejected")) << daemons_[d]->Log();
    // ...and its compile overwrote the bad entries with good ones.
    ASSERT_TRUE(WaitCounter(d, "shared.writes", 2));
  }
  size_t last = daemons_.size();
  StartDaemon({"--shared-key-file", key_a_});
  ResolveOutcome fetched = CallResolve(Stub(last), Saxpy());
  ASSERT_TRUE(fetched.status.ok());
  EXPECT_EQ(fetched.header.tier(), v1::TIER_SHARED);
  EXPECT_EQ(fetched.bytes, compiled.bytes);
}

TEST_F(SharedTierTest, DuringARotationTheSecondKeyStillReads) {
  StartDaemon({"--shared-key-file", key_a_});  // the fleet before the rotation
  ASSERT_TRUE(CallResolve(Stub(0), Saxpy()).status.ok());
  ASSERT_TRUE(WaitCounter(0, "shared.writes", 2));
  // A daemon moved to key B that still accepts key A reads what key A signed.
  StartDaemon({"--shared-key-file", key_b_, "--shared-key-file-second", key_a_});
  EXPECT_EQ(CallResolve(Stub(1), Saxpy()).header.tier(), v1::TIER_SHARED);
  // A daemon with key B alone does not: it rejects and compiles.
  StartDaemon({"--shared-key-file", key_b_});
  EXPECT_EQ(CallResolve(Stub(2), Saxpy()).header.tier(), v1::TIER_COMPILE);
  EXPECT_EQ(StatCounter(Stub(2), "shared.rejected"), 1u);
}

TEST_F(SharedTierTest, APausedClusterNeverFailsARequest) {
  StartDaemon({"--shared-key-file", key_a_, "--shared-budget-ms", "100"});
  for (int port : cluster_.ports()) cluster_.Pause(port);
  ResolveOutcome out = CallResolve(Stub(0), Saxpy());
  for (int port : cluster_.ports()) cluster_.Resume(port);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message() << daemons_[0]->Log();
  EXPECT_EQ(out.header.tier(), v1::TIER_COMPILE);
  EXPECT_GE(StatCounter(Stub(0), "shared.errors"), 1u);
}

TEST_F(SharedTierTest, ArtifactsOverTheSizeCapStayLocal) {
  StartDaemon({"--shared-key-file", key_a_, "--shared-max-bytes", "64"});
  ASSERT_TRUE(CallResolve(Stub(0), Saxpy()).status.ok());
  EXPECT_EQ(StatCounter(Stub(0), "shared.too_big"), 2u);
  EXPECT_EQ(StatCounter(Stub(0), "shared.writes"), 0u);
}

TEST_F(SharedTierTest, TwoDaemonsMissingAtOnceCompileOnceForBoth) {
  StartDaemon({"--shared-key-file", key_a_});
  StartDaemon({"--shared-key-file", key_a_});
  v1::ResolveRequest slow = ResolveSpec(WireSpec("slow", ::kcache::testing::kSlowSource), 8, 6);
  ResolveOutcome outcomes[2];
  std::thread second([&] { outcomes[1] = CallResolve(Stub(1), slow); });
  outcomes[0] = CallResolve(Stub(0), slow);
  second.join();
  for (const ResolveOutcome& out : outcomes) {
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  }
  EXPECT_EQ(outcomes[0].bytes, outcomes[1].bytes);
  EXPECT_EQ(StatCounter(Stub(0), "compile.runs") + StatCounter(Stub(1), "compile.runs"), 1u);
  EXPECT_EQ(StatCounter(Stub(0), "resolve.hit.shared") + StatCounter(Stub(1), "resolve.hit.shared"),
            1u);
  EXPECT_EQ(
      StatCounter(Stub(0), "shared.leases_taken") + StatCounter(Stub(1), "shared.leases_taken"),
      1u);
  // The lease is released once the entries are written.
  for (int i = 0; i < 300 && !EntryKeys("lease").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(EntryKeys("lease").empty());
}

TEST_F(SharedTierTest, WhenTheLeaseHolderDiesAnotherDaemonCompilesAfterItExpires) {
  DaemonProcess& holder = StartDaemon({"--shared-key-file", key_a_, "--shared-lease-seconds", "3"});
  StartDaemon({"--shared-key-file", key_a_});
  v1::ResolveRequest slow = ResolveSpec(WireSpec("slow", ::kcache::testing::kSlowSource), 8, 6);
  std::thread doomed([&] { CallResolve(Stub(0), slow); });
  for (int i = 0; i < 300 && EntryKeys("lease").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(EntryKeys("lease").size(), 1u) << "the holder never took the lease";
  holder.Kill(SIGKILL);  // mid-compile: the lease stays until it expires
  doomed.join();

  ResolveOutcome out = CallResolve(Stub(1), slow);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message() << daemons_[1]->Log();
  EXPECT_EQ(out.header.tier(), v1::TIER_COMPILE);
  EXPECT_EQ(StatCounter(Stub(1), "shared.lease_waits"), 1u);
  EXPECT_EQ(StatCounter(Stub(1), "shared.leases_expired"), 1u);
  EXPECT_EQ(StatCounter(Stub(1), "compile.runs"), 1u);
}

// The master holding an entry's slot is SIGKILLed while two daemons serve: every request made
// through the failover is answered (from the shared tier, memory or a compile), and once the
// replica is promoted a daemon started afterwards still finds the entry it replicated.
TEST_F(SharedTierTest, AMasterKilledWhileDaemonsServeLosesNoRequest) {
  StartDaemon({"--shared-key-file", key_a_, "--shared-budget-ms", "200"});
  StartDaemon({"--shared-key-file", key_a_, "--shared-budget-ms", "200"});
  ResolveOutcome compiled = CallResolve(Stub(0), Saxpy());
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.error_message() << daemons_[0]->Log();
  ASSERT_TRUE(WaitCounter(0, "shared.writes", 2)) << daemons_[0]->Log();
  std::vector<std::string> keys = EntryKeys();
  ASSERT_FALSE(keys.empty());
  int slot = std::atoi(Cli("CLUSTER KEYSLOT " + keys.front()).c_str());
  int victim = cluster_.MasterOfSlot(slot);
  ASSERT_NE(victim, 0) << "no master serves slot " << slot;
  // Wait until the victim's replica holds what the victim holds.
  std::string victim_id = cluster_.NodeOnPort(victim).id;
  int replica = 0;
  for (const testing::RedisNodeInfo& node : cluster_.Nodes()) {
    if (node.master_id == victim_id) replica = node.port;
  }
  ASSERT_NE(replica, 0);
  for (int i = 0; i < 600 && cluster_.Cli(replica, "dbsize") != cluster_.Cli(victim, "dbsize");
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  cluster_.Kill(victim);

  // Through the failover: the entry on daemon 1, and new kernels on both (each a miss that
  // looks up, leases and writes through the cluster).
  int requests = 0;
  int failed = 0;
  for (int round = 0; round < 8; ++round) {
    std::vector<std::pair<size_t, v1::ResolveRequest>> asks = {{1, Saxpy()}};
    for (size_t d = 0; d < 2; ++d) {
      asks.emplace_back(
          d, ResolveSpec(WireSpec(absl::StrCat("k", round, "_", d),
                                  absl::StrCat("// ", round, " ", d, "\n", testing::kSaxpySource)),
                         8, 6));
    }
    for (auto& [d, ask] : asks) {
      ResolveOutcome out = CallResolve(Stub(d), ask);
      ++requests;
      if (!out.status.ok()) {
        ++failed;
        ADD_FAILURE() << "daemon " << d << ": " << out.status.error_message();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::printf("master on port %d killed: %d of %d requests failed\n", victim, failed, requests);
  EXPECT_EQ(failed, 0);

  ASSERT_TRUE(cluster_.WaitClusterOk())
      << "the cluster did not recover: " << cluster_.error() << "\n"
      << cluster_.Cli(cluster_.LivePorts().front(), "cluster nodes")
      << cluster_.Cli(replica, "info replication");
  StartDaemon({"--shared-key-file", key_a_});
  ResolveOutcome fetched = CallResolve(Stub(2), Saxpy());
  ASSERT_TRUE(fetched.status.ok()) << fetched.status.error_message() << daemons_[2]->Log();
  EXPECT_EQ(fetched.header.tier(), v1::TIER_SHARED) << daemons_[2]->Log();
  EXPECT_EQ(fetched.bytes, compiled.bytes);
}

// A compile several times longer than the lease: the holder renews its lease while compiling,
// so the other daemon keeps waiting and gets the entry instead of compiling as well.
TEST_F(SharedTierTest, AHolderRenewsItsLeaseThroughACompileLongerThanTheLease) {
  StartDaemon({"--shared-key-file", key_a_, "--shared-lease-seconds", "1"});
  StartDaemon({"--shared-key-file", key_a_, "--shared-lease-seconds", "1"});
  // Several seconds of compile here (3x kSlowSource's arithmetic).
  std::string slower = absl::StrCat(
      "#define B a = sinf(a) * 1.0001f + cosf(a * 1.1f);\n#define R10(x) x x x x x x x x x x\n"
      "extern \"C\" __global__ void slower(float* y, const float* x) {\n"
      "  float a = x[threadIdx.x];\n  R10(B B B B B B B B B B B B)\n  y[threadIdx.x] = a;\n}\n");
  v1::ResolveRequest slow = ResolveSpec(WireSpec("slower", slower), 8, 6);
  auto start = std::chrono::steady_clock::now();
  ResolveOutcome outcomes[2];
  std::thread holder([&] { outcomes[0] = CallResolve(Stub(0), slow); });
  for (int i = 0; i < 300 && EntryKeys("lease").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  outcomes[1] = CallResolve(Stub(1), slow);
  holder.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("compile under a 1 s lease took %.1f s\n", seconds);
  for (const ResolveOutcome& out : outcomes) {
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  }
  if (seconds < 2.5) GTEST_SKIP() << "the compile was too quick to outlast the lease";
  EXPECT_EQ(StatCounter(Stub(0), "compile.runs") + StatCounter(Stub(1), "compile.runs"), 1u);
  EXPECT_GE(
      StatCounter(Stub(0), "shared.lease_renewals") + StatCounter(Stub(1), "shared.lease_renewals"),
      2u);
  EXPECT_EQ(
      StatCounter(Stub(0), "shared.leases_expired") + StatCounter(Stub(1), "shared.leases_expired"),
      0u);
  EXPECT_GT(StatCounter(Stub(0), "compile.cpu_micros") + StatCounter(Stub(1), "compile.cpu_micros"),
            0u);
}

TEST_F(SharedTierTest, SharedWithoutAKeyFileIsRefusedAtStart) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--shared", cluster_.Url()};
  ASSERT_TRUE(daemon.Spawn().ok());
  EXPECT_NE(daemon.Wait(), 0);
  EXPECT_TRUE(testing::Contains(daemon.Log(), "--shared-key-file")) << daemon.Log();
}

TEST_F(SharedTierTest, DoctorChecksReachabilityClusterStateAndTheKey) {
  std::string cli = testing::KcacheCli();
  testing::RunResult good = testing::Run(
      absl::StrCat(cli, " doctor --shared ", cluster_.Url(), " --shared-key-file ", key_a_));
  EXPECT_TRUE(testing::Contains(good.output, "shared " + cluster_.Url())) << good.output;
  EXPECT_TRUE(testing::Contains(good.output, "reachable")) << good.output;
  EXPECT_TRUE(testing::Contains(good.output, "cluster_state ok: 16384 slots served, 6 nodes"))
      << good.output;
  EXPECT_TRUE(testing::Contains(good.output, "key accepted")) << good.output;
  EXPECT_TRUE(EntryKeys().empty());  // the probe is deleted

  testing::RunResult short_key =
      testing::Run(absl::StrCat(cli, " doctor --shared ", cluster_.Url(), " --shared-key-file ",
                                dir_.Write("short.key", "short")));
  EXPECT_EQ(short_key.exit_code, 1);
  EXPECT_TRUE(testing::Contains(short_key.output, "at least 32 characters")) << short_key.output;

  // A cluster with a master gone and no failover yet: not ok.
  int master = cluster_.MasterOfSlot(0);
  cluster_.Kill(master);
  int alive = cluster_.LivePorts().front();
  for (int i = 0;
       i < 100 && testing::Contains(cluster_.Cli(alive, "cluster info"), "cluster_state:ok"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  testing::RunResult down = testing::Run(
      absl::StrCat(cli, " doctor --shared redis-cluster://127.0.0.1:", alive, " --timeout 1"));
  if (!testing::Contains(cluster_.Cli(alive, "cluster info"), "cluster_state:ok")) {
    EXPECT_EQ(down.exit_code, 1) << down.output;
    EXPECT_TRUE(testing::Contains(down.output, "cluster_state is 'fail'")) << down.output;
  }

  testing::RunResult nowhere =
      testing::Run(absl::StrCat(cli, " doctor --shared redis://127.0.0.1:", master));
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_TRUE(testing::Contains(nowhere.output, "not reachable")) << nowhere.output;
}

}  // namespace
}  // namespace kcache
