// kcached's start-up warm (docs/kcached.md, "Start-up") against a real daemon on a temp
// socket: once serving, it reads the stores' most recently used artifacts within
// --warm-start-max-bytes into the fast path's arena and remembers in the memory tier what a store
// hit would serve each cubin's SM, so the first workers are served from memory whatever their
// driver, byte for byte what the stores hold, never what their driver cannot load; a
// baked-store hit is copied into the writable store.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "engine/store/store.h"
#include "kcache/kcache.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/synthetic.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using client::Client;
using client::FetchedKernel;
using ::kcache::testing::DaemonProcess;

constexpr client::Device kSm89{8, 9, 13000};

std::unique_ptr<Client> Connect(const std::string& address) {
  client::ClientOptions options;
  options.address = address;
  options.local_compile_fallback = false;
  return *Client::Connect(options);
}

// A synthetic sm_89 cubin in a store: its kernel and bytes.
struct Stored {
  KernelRecord record;
  std::string bytes;
  std::string id() const { return record.id.Hex(); }
  ArtifactKey key() const {
    return ArtifactKey{record.id, ArtifactKind::kCubin, *ParseTarget("sm_89"),
                       testing::kFakeToolkit, 0};
  }
};

// One synthetic cubin per size, of recognisable bytes, put into the store at `path`.
std::vector<Stored> PutPayloads(const std::string& path, const std::vector<size_t>& sizes) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path);
  EXPECT_TRUE(store.ok()) << store.status();
  std::vector<Stored> out;
  for (size_t n = 0; n < sizes.size(); ++n) {
    Stored s{testing::Record(absl::StrCat("payload_", n), absl::StrCat("// payload ", n)), ""};
    s.bytes.resize(sizes[n]);
    for (size_t i = 0; i < sizes[n]; ++i) s.bytes[i] = static_cast<char>((i * 131 + n * 7) >> 3);
    testing::PutSynthetic(**store, s.record, "sm_89", s.bytes);
    out.push_back(std::move(s));
  }
  return out;
}

uint64_t Counter(Client& client, absl::string_view name) {
  absl::StatusOr<client::DaemonStats> stats = client.Stat();
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->Counter(name) : 0;
}

// Waits (up to testing::kWaitTimeout) until the warm has read `bytes`; the counter's last value.
uint64_t AwaitWarmed(Client& client, uint64_t bytes) {
  uint64_t warmed = 0;
  ::kcache::testing::WaitFor(
      [&] { return (warmed = Counter(client, "startup.warmed_bytes")) >= bytes; });
  return warmed;
}

TEST(StartupWarmTest, FillsTheArenaAndServesTheStoredBytes) {
  DaemonProcess daemon;
  std::vector<Stored> stored = PutPayloads(daemon.store_path(), {100000, 300000, 5000});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::unique_ptr<Client> c = Connect(daemon.address());
  ASSERT_EQ(AwaitWarmed(*c, 405000), 405000u) << daemon.Log();
  // In the arena before any worker asked for them.
  EXPECT_GE(Counter(*c, "fast.arena_bytes"), 405000u);
  EXPECT_EQ(Counter(*c, "resolve.requests"), 0u);
  for (const Stored& s : stored) {
    absl::StatusOr<FetchedKernel> k = c->ResolveById(s.id(), kSm89);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_NE(k->view_owner, nullptr) << "not served on the fast path";
    EXPECT_EQ(k->served_from, client::ServedFrom::kDaemonMemory);
    EXPECT_EQ(k->rule, client::ServeRule::kExactSass);
    EXPECT_EQ(k->reason, "sm_89 cubin matches device 8.9") << "the driver is known";
    EXPECT_TRUE(k->data() == s.bytes) << s.record.spec.name << ": other bytes than stored";
  }
  EXPECT_EQ(Counter(*c, "fast.hits"), 3u);
  EXPECT_EQ(Counter(*c, "resolve.hit.memory"), 3u);
  EXPECT_EQ(Counter(*c, "resolve.hit.local_store"), 0u);
}

// kcached is ready (its health check SERVING) only once the warm is done, within
// --warm-before-ready-ms: the first worker finds every kernel in memory, asking nothing twice.
TEST(StartupWarmTest, ReadyOnlyOnceTheWarmIsDone) {
  testing::DaemonOptions options;
  options.extra_flags = {"--warm-before-ready-ms", "20000"};
  DaemonProcess daemon(options);
  std::vector<Stored> stored = PutPayloads(daemon.store_path(), {100000, 300000, 5000});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::unique_ptr<Client> c = Connect(daemon.address());
  EXPECT_EQ(Counter(*c, "startup.warmed_bytes"), 405000u) << daemon.Log();
  for (const Stored& s : stored) {
    absl::StatusOr<FetchedKernel> k = c->ResolveById(s.id(), kSm89);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->served_from, client::ServedFrom::kDaemonMemory);
  }
}

TEST(StartupWarmTest, AnUnknownDriverIsServedFromMemoryAsAStoreHitWouldBe) {
  DaemonProcess daemon;
  std::vector<Stored> stored = PutPayloads(daemon.store_path(), {5000});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::unique_ptr<Client> c = Connect(daemon.address());
  ASSERT_EQ(AwaitWarmed(*c, 5000), 5000u) << daemon.Log();
  absl::StatusOr<FetchedKernel> k = c->ResolveById(stored[0].id(), client::Device{8, 9, 0});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->served_from, client::ServedFrom::kDaemonMemory);
  EXPECT_EQ(k->reason, "sm_89 cubin matches device 8.9; driver unknown, assumed 13.0 or newer");
  EXPECT_TRUE(k->data() == stored[0].bytes);
}

TEST(StartupWarmTest, ADriverTooOldForTheRememberedCubinIsNotServedIt) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--no-toolkit"};
  std::vector<Stored> stored = PutPayloads(daemon.store_path(), {5000});  // needs driver 13.0
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::unique_ptr<Client> c = Connect(daemon.address());
  ASSERT_EQ(AwaitWarmed(*c, 5000), 5000u) << daemon.Log();
  absl::StatusOr<FetchedKernel> k = c->ResolveById(stored[0].id(), client::Device{8, 9, 12080});
  ASSERT_FALSE(k.ok()) << "served " << client::ServedFromName(k->served_from);
  EXPECT_TRUE(absl::IsNotFound(k.status())) << k.status();
  EXPECT_EQ(Counter(*c, "resolve.hit.memory"), 0u);
}

TEST(StartupWarmTest, ReadsNoMoreThanItsBudget) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--warm-start-max-bytes", "1MiB"};
  std::vector<Stored> stored = PutPayloads(daemon.store_path(), {700000, 700000, 700000});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::unique_ptr<Client> c = Connect(daemon.address());
  ASSERT_EQ(AwaitWarmed(*c, 700000), 700000u) << daemon.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Counter(*c, "startup.warmed_bytes"), 700000u) << "one fits 1 MiB, two do not";
  for (const Stored& s : stored) {  // all served, warmed or not
    absl::StatusOr<FetchedKernel> k = c->ResolveById(s.id(), kSm89);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_TRUE(k->data() == s.bytes);
  }
}

TEST(StartupWarmTest, OffWithZeroBudget) {
  DaemonProcess daemon;
  daemon.options().extra_flags = {"--warm-start-max-bytes", "0"};
  PutPayloads(daemon.store_path(), {100000});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::unique_ptr<Client> c = Connect(daemon.address());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Counter(*c, "startup.warmed_bytes"), 0u);
  EXPECT_EQ(Counter(*c, "fast.arena_bytes"), 0u);
}

TEST(StartupWarmTest, BakedHitIsCopiedIntoTheWritableStore) {
  testing::TempDir dir;
  std::string baked = dir / "baked";
  std::vector<Stored> stored = PutPayloads(baked, {200000});
  testing::DaemonOptions options;
  options.baked = {baked};
  options.extra_flags = {"--warm-start-max-bytes", "0"};  // else the warm's memory answer serves it
  DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::unique_ptr<Client> c = Connect(daemon.address());
  absl::StatusOr<FetchedKernel> k = c->ResolveById(stored[0].id(), kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->served_from, client::ServedFrom::kDaemonBakedStore);
  EXPECT_TRUE(k->data() == stored[0].bytes);
  // Copied after the request, on kcached's writer thread.
  EXPECT_TRUE(::kcache::testing::WaitFor([&] { return Counter(*c, "tier.write_backs") != 0; }));
  EXPECT_EQ(Counter(*c, "tier.write_backs"), 1u);
  c.reset();
  ASSERT_EQ(daemon.Stop(), 0) << daemon.Log();
  absl::StatusOr<std::unique_ptr<Store>> writable = OpenStore(daemon.store_path());
  ASSERT_TRUE(writable.ok()) << writable.status();
  absl::StatusOr<Artifact> copy = (*writable)->Get(stored[0].key());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->bytes, stored[0].bytes);
}

}  // namespace
}  // namespace kcache
