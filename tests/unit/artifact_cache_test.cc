// The artifact cache over real RocksDB stores and the real in-process NVRTC compiler. Stored
// artifacts are placed by hand (marker bytes) where a rule must be reached exactly; compiles
// are real. The only fakes inject faults: a FailingStore, and a compiler decorator that
// counts compiles and can hold one open until the test lets it go.
#include "daemon/cache/artifact_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <thread>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/cubin.h"
#include "daemon/service/wire_convert.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/store/store.h"
#include "tests/testutil/failing_store.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/toolkit.h"

namespace kcache {
namespace {

using ::kcache::testing::FailingStore;
using ::kcache::testing::TempDir;

class CountingCompiler : public Compiler {
 public:
  explicit CountingCompiler(std::unique_ptr<Compiler> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) override {
    ++calls;
    if (hold != nullptr) hold->WaitForNotification();
    return inner_->Compile(job);
  }
  const Toolkit& toolkit() const override { return inner_->toolkit(); }

  std::atomic<int> calls{0};
  absl::Notification* hold = nullptr;  // when set, compiles wait for it

 private:
  std::unique_ptr<Compiler> inner_;
};

KernelRecord RecordOf(const std::string& name, const std::string& source) {
  KernelRecord record;
  record.spec.name = name;
  record.spec.source = source;
  record.id = ComputeKernelId(record.spec);
  record.registered_unix_ms = 1;
  return record;
}

void Place(Store& store, const KernelRecord& record, ArtifactKind kind, const std::string& target,
           std::string bytes = "") {
  Artifact a;
  a.meta.key = ArtifactKey{record.id, kind, *ParseTarget(target), "nvrtc-13.0+test", 0};
  a.meta.kernel_name = record.spec.name;
  a.meta.min_driver = 13000;
  a.meta.compile_micros = 1234;
  a.bytes = bytes.empty() ? "artifact for " + target : bytes;
  ASSERT_TRUE(store.Put(a).ok());
}

struct Options {
  bool compiler = true;
  uint64_t memory_bytes = 64 << 20;
  bool with_baked = false;
  absl::Duration tier_off = absl::Milliseconds(100);  // first switch-off; the max is 4x
  uint64_t write_back_queue_bytes = 64 << 20;
  size_t ptx_build_queue = 32;
  size_t ptx_build_queue_per_client = 8;
};

class ArtifactCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::shared_ptr<const Toolkit>>& toolkit =
        ::kcache::testing::SharedToolkit();
    ASSERT_TRUE(toolkit.ok()) << toolkit.status();
    toolkit_ = *toolkit;
    saxpy_ = RecordOf("saxpy", ::kcache::testing::kSaxpySource);
  }

  // Fills the baked store (created writable, then reopened read-only by Make).
  template <typename Fn>
  void PrepareBaked(Fn fill) {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(dir_ / "baked");
    ASSERT_TRUE(store.ok()) << store.status();
    fill(**store);
  }

  void Make(const Options& o = {}) {
    cache_.reset();  // closes the stores of an earlier cache
    absl::StatusOr<std::unique_ptr<Store>> local = OpenStore(dir_ / "local");
    ASSERT_TRUE(local.ok()) << local.status();
    auto failing = std::make_unique<FailingStore>(*std::move(local));
    local_ = failing.get();
    CacheOptions options;
    options.local = std::move(failing);
    if (o.with_baked) {
      StoreOptions read_only;
      read_only.read_only = true;
      absl::StatusOr<std::unique_ptr<Store>> baked = OpenStore(dir_ / "baked", read_only);
      ASSERT_TRUE(baked.ok()) << baked.status();
      options.baked.push_back(*std::move(baked));
    }
    if (o.compiler) {
      compiler_ = std::make_shared<CountingCompiler>(NewNvrtcCompiler(toolkit_));
      options.compilers.push_back(compiler_);
    }
    options.memory_bytes = o.memory_bytes;
    options.write_back_queue_bytes = o.write_back_queue_bytes;
    options.ptx_build_queue = o.ptx_build_queue;
    options.ptx_build_queue_per_client = o.ptx_build_queue_per_client;
    options.tier_off_initial = o.tier_off;
    options.tier_off_max = 4 * o.tier_off;
    absl::StatusOr<std::unique_ptr<ArtifactCache>> cache = NewArtifactCache(std::move(options));
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = *std::move(cache);
  }

  absl::StatusOr<Served> ById(const KernelId& id, const std::string& sm, bool compile = true) {
    ResolveQuery q;
    q.id = id;
    q.device = Device{*ParseSm(sm), 13000};
    q.allow_compile = compile;
    return cache_->Resolve(q);
  }
  // As a worker sends it: the record crosses the wire (which carries no id) and the daemon's
  // edge checks and converts it (CheckedQueryFromProto computes the id).
  absl::StatusOr<Served> BySpec(const KernelRecord& record, const std::string& sm) {
    v1::ResolveRequest request;
    RecordToProto(record, request.mutable_spec());
    request.mutable_device()->set_sm_major(static_cast<uint32_t>(ParseSm(sm)->major));
    request.mutable_device()->set_sm_minor(static_cast<uint32_t>(ParseSm(sm)->minor));
    request.mutable_device()->set_driver_version(13000);
    absl::StatusOr<ResolveQuery> q = CheckedQueryFromProto(request);
    if (!q.ok()) return q.status();
    return cache_->Resolve(*q);
  }

  uint64_t Counter(const std::string& name) const {
    for (const CounterValue& c : cache_->Snapshot().counters) {
      if (c.name == name) return c.value;
    }
    ADD_FAILURE() << "no counter " << name;
    return 0;
  }

  // Waits (bounded) until counter `name` reaches `value`. A non-fatal failure, so the caller
  // still releases held compiles and joins its threads.
  void AwaitCounter(const std::string& name, uint64_t value) {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (Counter(name) < value && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(2));
    EXPECT_EQ(Counter(name), value) << name;
  }

  TempDir dir_;
  std::shared_ptr<const Toolkit> toolkit_;
  std::shared_ptr<CountingCompiler> compiler_;
  FailingStore* local_ = nullptr;  // owned by cache_
  std::unique_ptr<ArtifactCache> cache_;
  KernelRecord saxpy_;
};

TEST_F(ArtifactCacheTest, EachStoredRuleIsServedFromTheLocalStore) {
  Make();
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_80");
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86");
  Place(*local_, saxpy_, ArtifactKind::kPtx, "compute_86");
  struct Case {
    const char* sm;
    ServeRule rule;
    const char* bytes;
  };
  for (const Case& c : {Case{"8.6", ServeRule::kExactSass, "artifact for sm_86"},
                        Case{"8.9", ServeRule::kCompatibleSass, "artifact for sm_86"},
                        Case{"9.0", ServeRule::kPtxJit, "artifact for compute_86"}}) {
    absl::StatusOr<Served> s = ById(saxpy_.id, c.sm, /*compile=*/false);
    ASSERT_TRUE(s.ok()) << c.sm << ": " << s.status();
    EXPECT_EQ(s->rule, c.rule) << c.sm;
    EXPECT_EQ(s->tier, CacheTier::kLocalStore) << c.sm;
    EXPECT_EQ(s->artifact->bytes, c.bytes) << c.sm;
    EXPECT_EQ(s->needs_jit(), c.rule == ServeRule::kPtxJit);
  }
  EXPECT_EQ(ById(saxpy_.id, "7.5", false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Counter("resolve.hit.local_store"), 3u);
  EXPECT_EQ(Counter("resolve.rule.compatible_sass"), 1u);
  EXPECT_EQ(Counter("compile.micros_saved"), 3u * 1234);
}

TEST_F(ArtifactCacheTest, ABySourceRequestIsHashedOnceFromTheWireToItsCompiledAnswer) {
  Make();
  v1::ResolveRequest request;
  request.mutable_spec()->set_name("saxpy");
  request.mutable_spec()->set_source(::kcache::testing::kSaxpySource);
  request.mutable_device()->set_sm_major(8);
  request.mutable_device()->set_sm_minor(9);
  request.mutable_device()->set_driver_version(13000);
  for (CacheTier expected : {CacheTier::kCompile, CacheTier::kMemory}) {
    uint64_t before = KernelIdsComputed();
    absl::StatusOr<ResolveQuery> query = CheckedQueryFromProto(request);
    ASSERT_TRUE(query.ok()) << query.status();
    absl::StatusOr<Served> served = cache_->Resolve(*query);
    ASSERT_TRUE(served.ok()) << served.status();
    EXPECT_EQ(served->tier, expected);
    EXPECT_EQ(served->artifact->meta.key.kernel_id, saxpy_.id);
    // The edge's conversion computes the id; nothing below it hashes the spec again.
    EXPECT_EQ(KernelIdsComputed() - before, 1u) << CacheTierName(expected);
  }
}

TEST_F(ArtifactCacheTest, FindAnswersWhatIsStoredAndLeavesACompilePendingUntilCompileRunsIt) {
  Make();
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86");
  auto query = [&](const std::string& sm) {
    v1::ResolveRequest request;
    RecordToProto(saxpy_, request.mutable_spec());
    request.mutable_device()->set_sm_major(static_cast<uint32_t>(ParseSm(sm)->major));
    request.mutable_device()->set_sm_minor(static_cast<uint32_t>(ParseSm(sm)->minor));
    request.mutable_device()->set_driver_version(13000);
    return *CheckedQueryFromProto(request);
  };
  // Stored: answered and counted by Find.
  ArtifactCache::Found stored = cache_->Find(query("8.6"));
  ASSERT_TRUE(std::holds_alternative<absl::StatusOr<Served>>(stored));
  const absl::StatusOr<Served>& hit = std::get<absl::StatusOr<Served>>(stored);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->tier, CacheTier::kLocalStore);
  EXPECT_EQ(Counter("resolve.requests"), 1u);

  // Nothing for sm_90: a compile decided, not run, not counted; one dropped unrun stays so.
  ASSERT_TRUE(std::holds_alternative<PendingCompile>(cache_->Find(query("9.0"))));
  ArtifactCache::Found missing = cache_->Find(query("9.0"));
  ASSERT_TRUE(std::holds_alternative<PendingCompile>(missing));
  EXPECT_EQ(compiler_->calls, 0);
  EXPECT_EQ(Counter("resolve.requests"), 1u);
  EXPECT_EQ(Counter("resolve.hit.compile"), 0u);

  // Compile runs what Find decided (no second lookup, no second hash) and counts the request.
  uint64_t ids = KernelIdsComputed();
  absl::StatusOr<Served> compiled = cache_->Compile(std::get<PendingCompile>(std::move(missing)));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->tier, CacheTier::kCompile);
  EXPECT_EQ(compiled->artifact->meta.key.target.sm.ToString(), "9.0");
  EXPECT_EQ(compiler_->calls, 1);
  EXPECT_EQ(KernelIdsComputed(), ids);
  EXPECT_EQ(Counter("resolve.requests"), 2u);
  EXPECT_EQ(Counter("resolve.hit.compile"), 1u);
}

TEST_F(ArtifactCacheTest, SecondResolveIsAMemoryHitSharingTheSameBytes) {
  Make();
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86");
  absl::StatusOr<Served> first = ById(saxpy_.id, "8.6");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->tier, CacheTier::kLocalStore);
  int store_calls = local_->calls();
  absl::StatusOr<Served> second = ById(saxpy_.id, "8.6");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->tier, CacheTier::kMemory);
  EXPECT_EQ(second->rule, ServeRule::kExactSass);
  EXPECT_EQ(second->artifact.get(), first->artifact.get());  // shared, not copied
  EXPECT_EQ(local_->calls(), store_calls);                   // no store access
  EXPECT_EQ(Counter("resolve.hit.memory"), 1u);
  EXPECT_EQ(Counter("resolve.bytes_served"), 2 * first->artifact->bytes.size());
}

// How fast a memory hit is belongs to bench/ (bench/serve measures resolves through kcached);
// here, that it is one: no store is touched.
TEST_F(ArtifactCacheTest, MemoryHitTouchesNoStore) {
  Make();
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86", std::string(200 << 10, 'c'));
  ASSERT_TRUE(ById(saxpy_.id, "8.6").ok());
  int store_calls = local_->calls();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(ById(saxpy_.id, "8.6")->tier, CacheTier::kMemory);
  EXPECT_EQ(local_->calls(), store_calls);

  ASSERT_TRUE(BySpec(saxpy_, "8.6").ok());  // by spec: the id is recomputed every time
  for (int i = 0; i < 100; ++i) ASSERT_EQ(BySpec(saxpy_, "8.6")->tier, CacheTier::kMemory);
  EXPECT_EQ(local_->calls(), store_calls + 2);  // registering the spec: one lookup, one write
}

TEST_F(ArtifactCacheTest, BakedStoreHitIsWrittenBackToLocalStoreAndMemory) {
  PrepareBaked([&](Store& baked) {
    ASSERT_TRUE(baked.PutKernel(saxpy_).ok());
    Place(baked, saxpy_, ArtifactKind::kCubin, "sm_89");
  });
  Make(Options{.with_baked = true});
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.9");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tier, CacheTier::kBakedStore);
  EXPECT_EQ(s->artifact->bytes, "artifact for sm_89");
  AwaitCounter("tier.write_backs", 1);  // copied after the request, by its own thread
  absl::StatusOr<Artifact> copied = local_->Get(s->artifact->meta.key);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->bytes, "artifact for sm_89");
  EXPECT_EQ(ById(saxpy_.id, "8.9")->tier, CacheTier::kMemory);
}

// The copy into the writable store waits in a bounded queue: with no room it is dropped and
// counted, and the request is served all the same.
TEST_F(ArtifactCacheTest, ABakedHitWhoseCopyHasNoRoomIsServedAndTheCopyCounted) {
  PrepareBaked([&](Store& baked) {
    ASSERT_TRUE(baked.PutKernel(saxpy_).ok());
    Place(baked, saxpy_, ArtifactKind::kCubin, "sm_89");
  });
  Make(Options{.memory_bytes = 0, .with_baked = true, .write_back_queue_bytes = 0});
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.9");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tier, CacheTier::kBakedStore);
  EXPECT_EQ(Counter("tier.write_backs_dropped"), 1u);
  EXPECT_EQ(Counter("tier.write_backs"), 0u);
  EXPECT_FALSE(local_->Get(s->artifact->meta.key).ok());
  EXPECT_EQ(ById(saxpy_.id, "8.9")->tier, CacheTier::kBakedStore);  // and again next time
  EXPECT_EQ(Counter("tier.write_backs_dropped"), 2u);
}

TEST_F(ArtifactCacheTest, CandidatesOfAllTiersAreRankedTogether) {
  // The baked store's exact cubin beats the local store's compatible one.
  PrepareBaked([&](Store& baked) { Place(baked, saxpy_, ArtifactKind::kCubin, "sm_89"); });
  Make(Options{.memory_bytes = 0, .with_baked = true});
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86");
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.9", false);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rule, ServeRule::kExactSass);
  EXPECT_EQ(s->tier, CacheTier::kBakedStore);
  AwaitCounter("tier.write_backs", 1);  // copied after the request
  s = ById(saxpy_.id, "8.9", false);    // written back: now found in the upper tier
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tier, CacheTier::kLocalStore);
  EXPECT_EQ(s->rule, ServeRule::kExactSass);
}

TEST_F(ArtifactCacheTest, SpecIsRegisteredUnderTheIdTheDaemonComputesThenResolvesByIdAndName) {
  Make();
  KernelRecord sent = saxpy_;
  sent.id = RecordOf("other", "other source").id;  // a sender's id never reaches the cache
  absl::StatusOr<Served> s = BySpec(sent, "8.6");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rule, ServeRule::kCompiled);
  EXPECT_EQ(s->tier, CacheTier::kCompile);
  EXPECT_EQ(*CubinSmArch(s->artifact->bytes), 86);
  EXPECT_EQ(s->artifact->meta.key.kernel_id, saxpy_.id);
  absl::StatusOr<KernelRecord> registered = local_->GetKernel(saxpy_.id);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_EQ(registered->spec.source, saxpy_.spec.source);
  EXPECT_FALSE(local_->GetKernel(sent.id).ok());
  EXPECT_EQ(Counter("kernels.registered"), 1u);

  absl::StatusOr<Served> by_id = ById(saxpy_.id, "8.0");  // nothing stored runs on 8.0
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_EQ(by_id->rule, ServeRule::kCompiled);
  ResolveQuery by_name;
  by_name.name = "saxpy";
  by_name.device = Device{{8, 6}, 13000};
  absl::StatusOr<Served> named = cache_->Resolve(by_name);
  ASSERT_TRUE(named.ok()) << named.status();
  // The 8.0 compile stored new artifacts of saxpy, which dropped its memory entries.
  EXPECT_EQ(named->tier, CacheTier::kLocalStore);
  EXPECT_EQ(named->rule, ServeRule::kExactSass);
  EXPECT_EQ(named->artifact->bytes, s->artifact->bytes);
  EXPECT_EQ(compiler_->calls.load(), 2);
}

TEST_F(ArtifactCacheTest, DeviceBelowDeclaredMinArchIsRefusedWithTheReason) {
  Make();
  saxpy_.arch.min_arch = 89;
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  Place(*local_, saxpy_, ArtifactKind::kPtx, "compute_75");  // would load; the kernel says 8.9+
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.6");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("needs SM 8.9"), absl::string_view::npos) << s.status();
  EXPECT_EQ(MissReasonOf(s.status()), MissReason::kBelowMinArch);
  EXPECT_EQ(Counter("miss.below_min_arch"), 1u);
  EXPECT_EQ(compiler_->calls.load(), 0);
}

TEST_F(ArtifactCacheTest, MissesSayNoToolkitCompileNotAllowedOrUnknownKernel) {
  Make(Options{.compiler = false});
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.6");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("no toolkit"), absl::string_view::npos) << s.status();
  EXPECT_EQ(Counter("miss.no_toolkit"), 1u);
  EXPECT_TRUE(cache_->Snapshot().toolkits.empty());

  Make();  // the same stores, now with a toolkit, but the request forbids compiling
  s = ById(saxpy_.id, "8.6", /*compile=*/false);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("compiling was not allowed"), absl::string_view::npos)
      << s.status();
  EXPECT_EQ(Counter("miss.compile_not_allowed"), 1u);
  s = ById(RecordOf("x", "never seen").id, "8.6");
  EXPECT_EQ(MissReasonOf(s.status()), MissReason::kUnknownKernel) << s.status();
  EXPECT_EQ(Counter("miss.unknown_kernel"), 1u);
  EXPECT_EQ(cache_->Snapshot().toolkits.at(0), toolkit_->identity().id);
}

TEST_F(ArtifactCacheTest, MalformedQueriesAreRefusedAtTheEdgeOrByTheirShape) {
  Make();
  ResolveQuery none;
  none.device = Device{{8, 6}, 0};
  EXPECT_EQ(cache_->Resolve(none).status().code(), absl::StatusCode::kInvalidArgument);
  ResolveQuery two = none;
  two.id = saxpy_.id;
  two.name = "saxpy";
  EXPECT_EQ(cache_->Resolve(two).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Counter("resolve.invalid"), 2u);
  // What a query holds is checked where it is made: a bad device never reaches the cache.
  for (auto [major, minor] : {std::pair{0u, 0u}, {100u, 0u}, {8u, 10u}, {~0u, 5u}}) {
    v1::ResolveRequest request;
    request.set_kernel_id(std::string(saxpy_.id.Bytes()));
    request.mutable_device()->set_sm_major(major);
    request.mutable_device()->set_sm_minor(minor);
    absl::StatusOr<ResolveQuery> query = CheckedQueryFromProto(request);
    EXPECT_EQ(query.status().code(), absl::StatusCode::kInvalidArgument) << major << "." << minor;
  }
  EXPECT_EQ(compiler_->calls.load(), 0);
}

TEST_F(ArtifactCacheTest, SixtyFourConcurrentResolvesOfAnUnwarmedKernelCompileOnce) {
  Make();
  absl::Notification release;
  compiler_->hold = &release;
  constexpr int kThreads = 64;
  std::vector<absl::StatusOr<Served>> served(kThreads, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { served[i] = BySpec(saxpy_, "8.9"); });
  }
  AwaitCounter("compile.single_flight_waiters", kThreads - 1);  // all but the compiler wait
  release.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(compiler_->calls.load(), 1);
  EXPECT_EQ(Counter("compile.runs"), 1u);
  for (const absl::StatusOr<Served>& s : served) {
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->rule, ServeRule::kCompiled);
    EXPECT_EQ(s->artifact.get(), served[0]->artifact.get());  // the same shared bytes
  }
  EXPECT_EQ(*CubinSmArch(served[0]->artifact->bytes), 89);
  EXPECT_EQ(Counter("resolve.hit.compile"), static_cast<uint64_t>(kThreads));
  EXPECT_EQ(ById(saxpy_.id, "8.9")->tier, CacheTier::kMemory);
}

TEST_F(ArtifactCacheTest, CompileErrorReachesEveryWaiterWithTheLog) {
  Make();
  absl::Notification release;
  compiler_->hold = &release;
  KernelRecord broken = RecordOf("broken", ::kcache::testing::kSyntaxErrorSource);
  constexpr int kThreads = 8;
  std::vector<absl::StatusOr<Served>> served(kThreads, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { served[i] = BySpec(broken, "8.6"); });
  }
  AwaitCounter("compile.single_flight_waiters", kThreads - 1);
  release.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(compiler_->calls.load(), 1);
  for (const absl::StatusOr<Served>& s : served) {
    EXPECT_EQ(s.status().code(), absl::StatusCode::kAborted) << s.status();
    EXPECT_NE(CompileLogOf(s.status()).find("undeclared_identifier"), std::string::npos)
        << s.status();
    EXPECT_EQ(MissReasonOf(s.status()), MissReason::kCompileError);
  }
  EXPECT_EQ(Counter("miss.compile_error"), static_cast<uint64_t>(kThreads));
  EXPECT_EQ(Counter("compile.errors"), 1u);
}

TEST_F(ArtifactCacheTest, FailingLocalStoreIsSwitchedOffServedBelowAndComesBack) {
  PrepareBaked([&](Store& baked) {
    ASSERT_TRUE(baked.PutKernel(saxpy_).ok());
    Place(baked, saxpy_, ArtifactKind::kCubin, "sm_86");
  });
  Make(Options{.memory_bytes = 0, .with_baked = true, .tier_off = absl::Milliseconds(300)});
  local_->set_failing(true);
  absl::StatusOr<Served> first = ById(saxpy_.id, "8.6");
  int calls = local_->calls();
  absl::StatusOr<Served> second = ById(saxpy_.id, "8.6");  // while off, the store is not asked
  EXPECT_EQ(local_->calls(), calls);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->tier, CacheTier::kBakedStore);
  EXPECT_EQ(second->tier, CacheTier::kBakedStore);
  EXPECT_GE(Counter("tier.failures"), 1u);
  EXPECT_GE(Counter("tier.switched_off"), 1u);
  EXPECT_GT(Counter("tier.skips"), 0u);

  // A spec nobody stored is still compiled and served while the local store fails.
  KernelRecord other = RecordOf("other", std::string(::kcache::testing::kSaxpySource) + "//2\n");
  absl::StatusOr<Served> compiled = BySpec(other, "8.6");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->tier, CacheTier::kCompile);

  // Healed: once its time off is over the tier is tried again, takes the write-back of the
  // baked hit, and then serves it.
  local_->set_failing(false);
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  CacheTier tier = CacheTier::kBakedStore;
  while (tier != CacheTier::kLocalStore && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    absl::StatusOr<Served> s = ById(saxpy_.id, "8.6");
    ASSERT_TRUE(s.ok()) << s.status();
    tier = s->tier;
  }
  EXPECT_EQ(tier, CacheTier::kLocalStore);
  EXPECT_GT(local_->calls(), calls);
  EXPECT_GE(Counter("tier.write_backs"), 1u);
}

TEST_F(ArtifactCacheTest, CorruptStoredEntryIsAMissAndTheRecompileReplacesIt) {
  std::string payload(200000, '\0');  // incompressible, so the store keeps it as it is
  uint64_t x = 88172645463325252ull;
  for (char& c : payload) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  PrepareBaked([&](Store& baked) {
    ASSERT_TRUE(baked.PutKernel(saxpy_).ok());
    Place(baked, saxpy_, ArtifactKind::kCubin, "sm_86", payload);
  });
  int flipped = 0;  // the payload lies raw in a blob file: flip one byte of it
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "baked")) {
    if (entry.path().extension() != ".blob") continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(file)), {});
    size_t at = content.find(payload.substr(100000, 64));
    if (at == std::string::npos) continue;
    file.seekp(static_cast<std::streamoff>(at));
    file.put(static_cast<char>(content[at] ^ 0x01));
    ++flipped;
  }
  ASSERT_EQ(flipped, 1);
  Make(Options{.memory_bytes = 0, .with_baked = true});
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.6");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tier, CacheTier::kCompile);  // the corrupt cubin was a miss, never served
  EXPECT_EQ(*CubinSmArch(s->artifact->bytes), 86);
  EXPECT_GE(Counter("store.checksum_failures"), 1u);
  s = ById(saxpy_.id, "8.6");  // the recompiled cubin now answers from the writable store
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tier, CacheTier::kLocalStore);
  EXPECT_EQ(*CubinSmArch(s->artifact->bytes), 86);
  EXPECT_EQ(compiler_->calls.load(), 1);
}

TEST_F(ArtifactCacheTest, EveryTierFailingWithNoSpecIsUnavailable) {
  Make(Options{.memory_bytes = 0});
  local_->set_failing(true);
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.6");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_EQ(cache_->List().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ArtifactCacheTest, MemoryTierStaysWithinItsByteBound) {
  Make(Options{.memory_bytes = 2500});
  std::vector<KernelRecord> kernels;
  for (int i = 0; i < 4; ++i) {
    kernels.push_back(RecordOf("k" + std::to_string(i), "source " + std::to_string(i)));
    Place(*local_, kernels.back(), ArtifactKind::kCubin, "sm_86", std::string(1000, 'a' + i));
    ASSERT_TRUE(ById(kernels.back().id, "8.6").ok());
    EXPECT_LE(cache_->Snapshot().memory_bytes, 2500u);
  }
  CacheSnapshot snapshot = cache_->Snapshot();
  EXPECT_EQ(snapshot.memory_bytes, 2000u);
  EXPECT_EQ(snapshot.memory_entries, 2u);
  EXPECT_EQ(Counter("memory.evictions"), 2u);
  EXPECT_EQ(ById(kernels[3].id, "8.6")->tier, CacheTier::kMemory);      // the newest stayed
  EXPECT_EQ(ById(kernels[0].id, "8.6")->tier, CacheTier::kLocalStore);  // the oldest went
}

TEST_F(ArtifactCacheTest, StoringANewArtifactInvalidatesTheKernelsMemoryEntries) {
  Make();
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_80");
  ASSERT_EQ(ById(saxpy_.id, "8.6")->rule, ServeRule::kCompatibleSass);
  ASSERT_EQ(ById(saxpy_.id, "8.6")->tier, CacheTier::kMemory);
  Manifest manifest = ManifestFromRecords({saxpy_});
  ASSERT_TRUE(cache_->Warm(manifest, WarmOptions{{*ParseTarget("8.6")}, 1}, nullptr).ok());
  absl::StatusOr<Served> s = ById(saxpy_.id, "8.6");  // the warm's exact cubin, not the stale one
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rule, ServeRule::kExactSass);
  EXPECT_EQ(s->tier, CacheTier::kLocalStore);
  EXPECT_GE(Counter("memory.invalidations"), 1u);
}

TEST_F(ArtifactCacheTest, WarmThroughTheCacheThenResolveIsAStoreHit) {
  Make();
  dir_.Write("src/saxpy.cu", ::kcache::testing::kSaxpySource);
  absl::StatusOr<Manifest> manifest = ParseManifest(
      "version: 1\nkernels:\n  - name: saxpy\n    source: saxpy.cu\n", dir_ / "src/m.yaml");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  WarmOptions options{{*ParseTarget("8.6")}, 1};
  absl::StatusOr<WarmSummary> summary = cache_->Warm(*manifest, options, nullptr);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->built, 1);
  EXPECT_EQ(compiler_->calls.load(), 1);
  absl::StatusOr<Served> s = ById(manifest->kernels[0].record.id, "8.6");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tier, CacheTier::kLocalStore);
  EXPECT_EQ(s->rule, ServeRule::kExactSass);
  EXPECT_EQ(cache_->Warm(*manifest, options, nullptr)->cached, 1);
  EXPECT_EQ(compiler_->calls.load(), 1);
  EXPECT_EQ(Counter("compile.runs"), 1u);

  WarmOptions unsupported{{*ParseTarget("7.0")}, 1};
  EXPECT_EQ(cache_->Warm(*manifest, unsupported, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ArtifactCacheTest, WarmAndMissOfTheSameArtifactCompileOnce) {
  Make();
  absl::Notification release;
  compiler_->hold = &release;
  Manifest manifest = ManifestFromRecords({saxpy_});
  std::thread warm([&] {
    absl::StatusOr<WarmSummary> s =
        cache_->Warm(manifest, WarmOptions{{*ParseTarget("8.6")}, 1}, nullptr);
    EXPECT_TRUE(s.ok() && s->ok());
  });
  // The warm holds the compile; the miss joins it.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (compiler_->calls.load() == 0 && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(1));
  absl::StatusOr<Served> miss = absl::UnknownError("not run");
  std::thread resolve([&] { miss = BySpec(saxpy_, "8.6"); });
  AwaitCounter("compile.single_flight_waiters", 1);
  release.Notify();
  warm.join();
  resolve.join();
  ASSERT_TRUE(miss.ok()) << miss.status();
  EXPECT_EQ(*CubinSmArch(miss->artifact->bytes), 86);
  EXPECT_EQ(compiler_->calls.load(), 1);
}

TEST_F(ArtifactCacheTest, SeenRecordsKernelsDevicesAndRequests) {
  Make();
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86");
  ASSERT_TRUE(ById(saxpy_.id, "8.6").ok());
  ASSERT_TRUE(ById(saxpy_.id, "8.6").ok());  // a memory hit counts too
  ASSERT_TRUE(ById(saxpy_.id, "8.9", false).ok());
  EXPECT_FALSE(ById(RecordOf("x", "unknown").id, "8.6").ok());  // no spec anywhere: not exported
  std::vector<SeenKernel> seen = cache_->Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].record.id, saxpy_.id);
  EXPECT_EQ(seen[0].record.spec.source, saxpy_.spec.source);
  EXPECT_EQ(seen[0].requests, 3u);
  EXPECT_EQ(seen[0].devices, (std::vector<Sm>{{8, 6}, {8, 9}}));
}

TEST_F(ArtifactCacheTest, ListShowsEveryKernelWithTheTierItsArtifactsLiveIn) {
  KernelRecord other = RecordOf("other", "other source");
  PrepareBaked([&](Store& baked) {
    ASSERT_TRUE(baked.PutKernel(other).ok());
    Place(baked, other, ArtifactKind::kCubin, "sm_90");
  });
  Make(Options{.with_baked = true});
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86");
  absl::StatusOr<std::vector<ListedKernelInfo>> listed = cache_->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].record.spec.name, "other");
  ASSERT_EQ((*listed)[0].artifacts.size(), 1u);
  EXPECT_EQ((*listed)[0].artifacts[0].tier, CacheTier::kBakedStore);
  EXPECT_EQ((*listed)[1].record.spec.name, "saxpy");
  EXPECT_EQ((*listed)[1].artifacts[0].tier, CacheTier::kLocalStore);
}

TEST_F(ArtifactCacheTest, SnapshotListsEveryCounterWithHelpAndStoreSizes) {
  Make();
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86", std::string(300, 'x'));
  CacheSnapshot snapshot = cache_->Snapshot();
  std::set<std::string> names;
  for (const CounterValue& c : snapshot.counters) {
    EXPECT_FALSE(c.help.empty()) << c.name;
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
  }
  EXPECT_EQ(snapshot.counters.front().name, "resolve.requests");  // number 1
  EXPECT_EQ(snapshot.writable().artifacts, 1u);
  EXPECT_EQ(snapshot.writable().artifact_bytes, 300u);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

// Stored PTX is not the steady answer when the device's SASS can be built (a JIT at every
// worker start): the SASS is compiled and served; ptx_now takes the PTX now and compiles the
// SASS in the background for the next caller; without a compile allowed, the PTX stays.
TEST_F(ArtifactCacheTest, StoredPtxIsReplacedBySassCompiledNowOrInTheBackground) {
  Make();
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  Place(*local_, saxpy_, ArtifactKind::kPtx, "compute_86");

  absl::StatusOr<Served> no_compile = ById(saxpy_.id, "9.0", /*compile=*/false);
  ASSERT_TRUE(no_compile.ok()) << no_compile.status();
  EXPECT_EQ(no_compile->rule, ServeRule::kPtxJit);
  EXPECT_EQ(compiler_->calls.load(), 0);

  ResolveQuery now;
  now.id = saxpy_.id;
  now.device = Device{{9, 0}, 13000};
  now.ptx_now = true;
  absl::StatusOr<Served> ptx = cache_->Resolve(now);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(ptx->rule, ServeRule::kPtxJit);
  EXPECT_EQ(ptx->artifact->meta.key.target.ToString(), "compute_86");
  EXPECT_EQ(Counter("compile.background_queued"), 1u);
  AwaitCounter("compile.runs", 1);  // the background compile of sm_90, until it is stored
  auto stored_sm90 = [&] {
    absl::StatusOr<std::vector<ArtifactMeta>> listed = local_->ListArtifacts(saxpy_.id);
    for (const ArtifactMeta& m : listed.ok() ? *listed : std::vector<ArtifactMeta>{}) {
      if (m.key.target.ToString() == "sm_90") return true;
    }
    return false;
  };
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!stored_sm90() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(stored_sm90());
  absl::StatusOr<Served> sass = ById(saxpy_.id, "9.0");
  ASSERT_TRUE(sass.ok()) << sass.status();
  EXPECT_EQ(sass->rule, ServeRule::kExactSass);
  EXPECT_EQ(sass->artifact->meta.key.target.ToString(), "sm_90");
  EXPECT_EQ(sass->tier, CacheTier::kLocalStore);
  EXPECT_EQ(compiler_->calls.load(), 1);

  // A device with only PTX stored and no ptx_now: compiled on this request.
  absl::StatusOr<Served> compiled = ById(saxpy_.id, "12.0");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->rule, ServeRule::kCompiled);
  EXPECT_EQ(compiled->artifact->meta.key.target.ToString(), "sm_120");
  EXPECT_EQ(compiler_->calls.load(), 2);
}

TEST_F(ArtifactCacheTest, NothingIsServedOrCompiledThatTheDriverCannotLoad) {
  Make();
  ASSERT_TRUE(local_->PutKernel(saxpy_).ok());
  Place(*local_, saxpy_, ArtifactKind::kCubin, "sm_86");  // min_driver 13000
  ResolveQuery old_driver;
  old_driver.id = saxpy_.id;
  old_driver.device = Device{{8, 6}, 12080};
  absl::StatusOr<Served> s = cache_->Resolve(old_driver);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(MissReasonOf(s.status()), MissReason::kDriverTooOld) << s.status();
  EXPECT_NE(s.status().message().find("driver 12.8 cannot load code built by NVRTC 13.0"),
            absl::string_view::npos)
      << s.status();
  EXPECT_EQ(Counter("miss.driver_too_old"), 1u);
  EXPECT_EQ(compiler_->calls.load(), 0);  // the 13.0 toolkit's output would not load either
  old_driver.device.driver = 0;           // unknown: assumed new enough, and said so
  s = cache_->Resolve(old_driver);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(s->reason.find("driver unknown, assumed 13.0 or newer"), std::string::npos)
      << s->reason;
}

// A PTX module with one kernel, `name`, for compute_75.
std::string PtxModule(const std::string& name) {
  return absl::StrCat(".version 7.0\n.target sm_75\n.address_size 64\n\n.visible .entry ", name,
                      "()\n{\n  ret;\n}\n");
}

// SASS built from PTX that loads sent waits in a bounded queue (while a build runs): the same
// module and target asked again is not queued twice; a client past its share, and anyone past
// the whole queue, is refused, naming the flag, and counted dropped; the rest are built.
TEST_F(ArtifactCacheTest, PtxBuildsWaitInABoundedQueueWithAShareForEachClient) {
  Options o;
  o.ptx_build_queue = 3;
  o.ptx_build_queue_per_client = 2;
  Make(o);
  absl::Notification release;
  compiler_->hold = &release;
  auto ask = [&](const std::string& kernel, const std::string& client) {
    return cache_->BuildFromPtx(PtxBuildRequest{PtxModule(kernel), Device{{8, 6}, 0}, client});
  };
  absl::StatusOr<PtxBuildQueued> first = ask("k0", "pod-a");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->target.ToString(), "sm_86");
  absl::Time deadline = absl::Now() + absl::Seconds(30);  // it leaves the queue, held building
  while (compiler_->calls.load() < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(compiler_->calls.load(), 1);
  absl::StatusOr<PtxBuildQueued> k1 = ask("k1", "pod-a");
  ASSERT_TRUE(k1.ok()) << k1.status();
  EXPECT_EQ(k1->state, PtxBuildQueued::State::kQueued);
  absl::StatusOr<PtxBuildQueued> k1_again = ask("k1", "pod-b");
  ASSERT_TRUE(k1_again.ok()) << k1_again.status();
  EXPECT_EQ(k1_again->state, PtxBuildQueued::State::kAlreadyQueued);
  EXPECT_EQ(k1_again->module, k1->module);
  ASSERT_TRUE(ask("k2", "pod-a").ok());
  absl::StatusOr<PtxBuildQueued> over_share = ask("k3", "pod-a");
  EXPECT_EQ(over_share.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_share.status().message().find("--ptx-build-queue-per-client"),
            absl::string_view::npos)
      << over_share.status();
  ASSERT_TRUE(ask("k4", "pod-b").ok());
  absl::StatusOr<PtxBuildQueued> over_queue = ask("k5", "pod-c");
  EXPECT_EQ(over_queue.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_queue.status().message().find("--ptx-build-queue)"), absl::string_view::npos)
      << over_queue.status();
  EXPECT_EQ(Counter("ptx_builds.queued"), 4u);
  EXPECT_EQ(Counter("ptx_builds.dropped"), 2u);
  EXPECT_EQ(Counter("ptx_builds.refused"), 0u);
  release.Notify();
  AwaitCounter("ptx_builds.built", 4);
  EXPECT_EQ(compiler_->calls.load(), 4);
  // Built and stored: asked again, it is held.
  absl::StatusOr<PtxBuildQueued> held = ask("k2", "pod-a");
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->state, PtxBuildQueued::State::kHeld);
}

}  // namespace
}  // namespace kcache
