// DecideResolve, the one serving decision, as a table: what is stored, the device and its
// driver, the policy, the toolkits and whether the caller sent the spec, in; the action, the
// stored answer's rule and target, the compile's target, or the refusal's code and miss reason,
// out. The stores are real (RocksDB in a temp dir, artifacts placed by hand: the decision reads
// only their metadata); the toolkit is the real NVRTC; a failing tier is a fake that only
// injects the failure.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/target.h"
#include "engine/compile/toolkit.h"
#include "engine/resolve/decide.h"
#include "engine/store/store.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using Action = ResolveDecision::Action;

// The kernel every case stores: saxpy, its id computed.
KernelRecord SaxpyRecord() {
  KernelRecord record;
  record.spec.name = "saxpy";
  record.spec.source = ::kcache::testing::kSaxpySource;
  record.id = ComputeKernelId(record.spec);
  return record;
}

// The stores the decision reads, over real stores; a null entry is a tier that fails.
class Tiers : public StoreTiers {
 public:
  explicit Tiers(std::vector<Store*> stores) : stores_(std::move(stores)) {}
  size_t size() const override { return stores_.size(); }
  absl::StatusOr<KernelRecord> GetKernel(size_t tier, const KernelId& id) override {
    if (stores_[tier] == nullptr) return Failing();
    return stores_[tier]->GetKernel(id);
  }
  absl::StatusOr<std::vector<ArtifactMeta>> ListArtifacts(size_t tier,
                                                          const KernelId& id) override {
    if (stores_[tier] == nullptr) return Failing();
    return stores_[tier]->ListArtifacts(id);
  }
  absl::StatusOr<Artifact> Get(size_t tier, const ArtifactKey& key) override {
    if (stores_[tier] == nullptr) return Failing();
    ++reads;
    return stores_[tier]->Get(key);
  }
  int reads = 0;  // artifacts read

 private:
  static absl::Status Failing() { return absl::UnavailableError("this tier fails (injected)"); }
  std::vector<Store*> stores_;
};

struct Stored {
  ArtifactKind kind;
  std::string target;
  uint32_t min_driver = 13000;
};

struct Row {
  std::string name;
  // In.
  std::vector<Stored> stored;
  std::string sm;
  uint32_t driver = 0;  // 0: unknown
  ResolvePolicy policy = {};
  bool toolkit = true;      // the real NVRTC is given
  bool record = true;       // the store holds the kernel's record
  bool sent = false;        // the caller sent the spec
  ArchRange arch = {};      // the kernel's declared range
  bool tier_fails = false;  // the only tier fails
  // Out: an action, the stored answer (rule, target) and the compile's target ("" for none)...
  std::optional<Action> action;
  std::optional<ServeRule> stored_rule;
  std::string stored_target;
  std::string compile_target;
  // ... or a refusal.
  absl::StatusCode code = absl::StatusCode::kOk;
  std::optional<MissReason> reason;
};

// gtest prints a row by its name, not its bytes.
void PrintTo(const Row& row, std::ostream* os) { *os << '"' << row.name << '"'; }

std::vector<Row> Table() {
  const auto kCubin = ArtifactKind::kCubin;
  const auto kPtx = ArtifactKind::kPtx;
  ResolvePolicy ptx_now;
  ptx_now.ptx_now = true;
  ResolvePolicy no_compile;
  no_compile.allow_compile = false;
  std::vector<Row> rows;
  {
    Row r;
    r.name = "exact SASS is served";
    r.stored = {{kCubin, "sm_89"}, {kCubin, "sm_86"}, {kPtx, "compute_80"}};
    r.sm = "8.9";
    r.action = Action::kServe;
    r.stored_rule = ServeRule::kExactSass;
    r.stored_target = "sm_89";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "same major, lower minor SASS is served";
    r.stored = {{kCubin, "sm_86"}, {kPtx, "compute_80"}};
    r.sm = "8.9";
    r.action = Action::kServe;
    r.stored_rule = ServeRule::kCompatibleSass;
    r.stored_target = "sm_86";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "newer SASS is never handed to a smaller device: compile";
    r.stored = {{kCubin, "sm_90"}};
    r.sm = "8.9";
    r.action = Action::kCompile;
    r.compile_target = "sm_89";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "another major's SASS is not compatible: compile";
    r.stored = {{kCubin, "sm_80"}};
    r.sm = "9.0";
    r.action = Action::kCompile;
    r.compile_target = "sm_90";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "stored PTX and a toolkit: the SASS is compiled, the PTX kept as fallback";
    r.stored = {{kPtx, "compute_80"}};
    r.sm = "8.9";
    r.action = Action::kCompile;
    r.stored_rule = ServeRule::kPtxJit;
    r.stored_target = "compute_80";
    r.compile_target = "sm_89";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "stored PTX with ptx_now: served now, SASS compiled for later";
    r.stored = {{kPtx, "compute_80"}};
    r.sm = "8.9";
    r.policy = ptx_now;
    r.action = Action::kServeAndCompile;
    r.stored_rule = ServeRule::kPtxJit;
    r.stored_target = "compute_80";
    r.compile_target = "sm_89";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "stored PTX and no toolkit: served for the driver to JIT";
    r.stored = {{kPtx, "compute_80"}};
    r.sm = "8.9";
    r.toolkit = false;
    r.action = Action::kServe;
    r.stored_rule = ServeRule::kPtxJit;
    r.stored_target = "compute_80";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "stored PTX, compiling not allowed: served for the driver to JIT";
    r.stored = {{kPtx, "compute_80"}};
    r.sm = "8.9";
    r.policy = no_compile;
    r.action = Action::kServe;
    r.stored_rule = ServeRule::kPtxJit;
    r.stored_target = "compute_80";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "PTX above the device is never served";
    r.stored = {{kPtx, "compute_90"}};
    r.sm = "8.9";
    r.toolkit = false;
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kNoToolkit;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "nothing stored: compile for the device";
    r.sm = "8.9";
    r.action = Action::kCompile;
    r.compile_target = "sm_89";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "nothing stored, no toolkit";
    r.sm = "8.9";
    r.toolkit = false;
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kNoToolkit;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "nothing stored, compiling not allowed";
    r.sm = "8.9";
    r.policy = no_compile;
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kCompileNotAllowed;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "an SM no toolkit knows: PTX of the highest arch below it is compiled";
    r.sm = "15.0";
    r.driver = 99000;
    r.action = Action::kCompile;
    r.compile_target = "compute_";  // a prefix: the toolkit's highest arch
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "an SM no toolkit knows, no toolkit";
    r.sm = "15.0";
    r.toolkit = false;
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kNoToolkit;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "no record and no spec sent: unknown";
    r.sm = "8.9";
    r.record = false;
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kUnknownKernel;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "no record, the spec sent: compile";
    r.sm = "8.9";
    r.record = false;
    r.sent = true;
    r.action = Action::kCompile;
    r.compile_target = "sm_89";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "below the declared min_arch, even with SASS stored";
    r.stored = {{kCubin, "sm_75"}};
    r.sm = "7.5";
    r.arch = {80, 0};
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kBelowMinArch;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "above the declared max_arch";
    r.sm = "9.0";
    r.arch = {80, 89};
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kAboveMaxArch;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "stored SASS the known driver cannot load, no toolkit the driver loads";
    r.stored = {{kCubin, "sm_89", 13000}};
    r.sm = "8.9";
    r.driver = 12040;
    r.code = absl::StatusCode::kNotFound;
    r.reason = MissReason::kDriverTooOld;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "stored SASS an unknown driver is assumed to load";
    r.stored = {{kCubin, "sm_89", 13000}};
    r.sm = "8.9";
    r.driver = 0;
    r.action = Action::kServe;
    r.stored_rule = ServeRule::kExactSass;
    r.stored_target = "sm_89";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "an older artifact the driver loads is served past a newer one it cannot";
    r.stored = {{kCubin, "sm_89", 13000}, {kCubin, "sm_86", 12000}};
    r.sm = "8.9";
    r.driver = 12040;
    r.action = Action::kServe;
    r.stored_rule = ServeRule::kCompatibleSass;
    r.stored_target = "sm_86";
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "every tier failing and no spec sent";
    r.sm = "8.9";
    r.tier_fails = true;
    r.code = absl::StatusCode::kUnavailable;
    rows.push_back(std::move(r));
  }
  {
    Row r;
    r.name = "every tier failing, the spec sent: compile";
    r.sm = "8.9";
    r.sent = true;
    r.tier_fails = true;
    r.action = Action::kCompile;
    r.compile_target = "sm_89";
    rows.push_back(std::move(r));
  }
  return rows;
}

class DecideResolveTest : public ::testing::TestWithParam<Row> {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::shared_ptr<const Toolkit>> loaded = Toolkit::Load(Toolkit::DefaultRoot());
    if (loaded.ok()) toolkit_ = new std::shared_ptr<const Toolkit>(*loaded);
  }
  static void TearDownTestSuite() {
    delete toolkit_;
    toolkit_ = nullptr;
  }
  static std::shared_ptr<const Toolkit>* toolkit_;
};
std::shared_ptr<const Toolkit>* DecideResolveTest::toolkit_ = nullptr;

TEST_P(DecideResolveTest, DecidesAsTheRulesSay) {
  const Row& row = GetParam();
  if (row.toolkit && toolkit_ == nullptr) GTEST_SKIP() << "no CUDA toolkit";
  ::kcache::testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(dir / "store");
  ASSERT_TRUE(store.ok()) << store.status();
  KernelRecord record = SaxpyRecord();
  record.arch = row.arch;
  record.registered_unix_ms = 1;
  if (row.record) {
    ASSERT_TRUE((*store)->PutKernel(record).ok());
  }
  for (const Stored& s : row.stored) {
    Artifact a;
    a.meta.key = ArtifactKey{record.id, s.kind, *ParseTarget(s.target), "nvrtc-13.0+test", 0};
    a.meta.kernel_name = record.spec.name;
    a.meta.min_driver = s.min_driver;
    a.bytes = absl::StrCat("artifact for ", s.target);
    ASSERT_TRUE((*store)->Put(a).ok());
  }
  Tiers tiers({row.tier_fails ? nullptr : store->get()});
  std::vector<const Toolkit*> toolkits;
  if (row.toolkit) toolkits.push_back(toolkit_->get());
  absl::StatusOr<Sm> sm = ParseSm(row.sm);
  Device device{sm.ok() ? *sm : Sm{0, 0}, row.driver};

  absl::StatusOr<ResolveDecision> decision =
      DecideResolve(tiers, record.id, row.sent ? &record : nullptr, device, row.policy, toolkits);

  if (row.code != absl::StatusCode::kOk) {
    ASSERT_FALSE(decision.ok()) << "decided an action where a refusal was expected";
    EXPECT_EQ(decision.status().code(), row.code) << decision.status();
    if (row.reason) {
      EXPECT_EQ(MissReasonOf(decision.status()), row.reason) << decision.status();
    }
    return;
  }
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->action, *row.action);
  if (row.stored_rule) {
    ASSERT_TRUE(decision->stored.has_value()) << "no stored answer";
    EXPECT_EQ(decision->stored->rule, *row.stored_rule) << decision->stored->reason;
    EXPECT_EQ(decision->stored->artifact->meta.key.target.ToString(), row.stored_target);
  } else {
    EXPECT_FALSE(decision->stored.has_value())
        << "stored " << decision->stored->artifact->meta.key.target.ToString();
  }
  if (!row.compile_target.empty()) {
    ASSERT_TRUE(decision->compile.has_value()) << "no compile";
    EXPECT_EQ(decision->compile->target.ToString().rfind(row.compile_target, 0), 0u)
        << decision->compile->target.ToString();
    EXPECT_EQ(decision->compile->id, record.id);
  } else {
    EXPECT_FALSE(decision->compile.has_value())
        << "compiles " << decision->compile->target.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, DecideResolveTest, ::testing::ValuesIn(Table()),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           std::string name;
                           for (char c : info.param.name) {
                             if (std::isalnum(static_cast<unsigned char>(c))) name += c;
                             if (c == ' ' && !name.empty() && name.back() != '_') name += '_';
                           }
                           return name;
                         });

// ResolvePolicy::held: an artifact the caller already read is not read again when it is the
// answer; one that is not the answer (another key, or the same key with other bytes) changes
// nothing.
TEST(DecideResolveHeldTest, AHeldAnswerIsNotReadAgain) {
  ::kcache::testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(dir / "store");
  ASSERT_TRUE(store.ok()) << store.status();
  KernelRecord record = SaxpyRecord();
  ASSERT_TRUE((*store)->PutKernel(record).ok());
  std::vector<std::shared_ptr<const Artifact>> stored;
  for (const char* target : {"sm_89", "sm_86"}) {
    Artifact a;
    a.meta.key =
        ArtifactKey{record.id, ArtifactKind::kCubin, *ParseTarget(target), "nvrtc-13.0+test", 0};
    a.meta.kernel_name = record.spec.name;
    a.bytes = absl::StrCat("artifact for ", target);
    ASSERT_TRUE((*store)->Put(a).ok());
    absl::StatusOr<Artifact> read = (*store)->Get(a.meta.key);  // as the store hands it out
    ASSERT_TRUE(read.ok()) << read.status();
    stored.push_back(std::make_shared<const Artifact>(*std::move(read)));
  }
  Device device{Sm{8, 9}, 0};
  auto decide = [&](const std::shared_ptr<const Artifact>& held, int* reads) {
    Tiers tiers({store->get()});
    ResolvePolicy policy{.allow_compile = false, .held = held};
    absl::StatusOr<ResolveDecision> decision =
        DecideResolve(tiers, record.id, nullptr, device, policy, {});
    *reads = tiers.reads;
    return decision;
  };
  int reads = 0;
  absl::StatusOr<ResolveDecision> held = decide(stored[0], &reads);  // the answer: sm_89
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(held->stored.has_value());
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(held->stored->artifact->bytes, "artifact for sm_89");
  EXPECT_EQ(held->stored->rule, ServeRule::kExactSass);

  absl::StatusOr<ResolveDecision> other = decide(stored[1], &reads);  // not the answer
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(other->stored->artifact->bytes, "artifact for sm_89");

  auto changed = std::make_shared<Artifact>(*stored[0]);
  changed->meta.checksum ^= 1;  // the same key, other bytes than the store's: read the store's
  changed->bytes = "not what the store holds";
  absl::StatusOr<ResolveDecision> stale = decide(changed, &reads);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(stale->stored->artifact->bytes, "artifact for sm_89");
}

}  // namespace
}  // namespace kcache
