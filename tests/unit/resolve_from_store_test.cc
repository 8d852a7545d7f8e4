// The serving rules end to end over a real store. Artifacts here are placed by hand (their
// bytes are markers) so every rule can be reached; compile-on-miss uses real NVRTC.
#include <gtest/gtest.h>

#include "core/cubin.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/resolve/in_process.h"
#include "engine/store/store.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::TempDir;

class ResolveFromStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(dir_ / "store");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    record_.spec.name = "saxpy";
    record_.spec.source = ::kcache::testing::kSaxpySource;
    record_.id = ComputeKernelId(record_.spec);
    record_.registered_unix_ms = 1;
    ASSERT_TRUE(store_->PutKernel(record_).ok());
  }

  void Place(ArtifactKind kind, const std::string& target, uint32_t min_driver = 13000) {
    Artifact a;
    a.meta.key = ArtifactKey{record_.id, kind, *ParseTarget(target), "nvrtc-13.0+test", 0};
    a.meta.kernel_name = record_.spec.name;
    a.meta.min_driver = min_driver;
    a.bytes = "artifact for " + target;
    ASSERT_TRUE(store_->Put(a).ok());
  }

  absl::StatusOr<InProcessAnswer> Resolve(const std::string& sm, uint32_t driver = 0,
                                          Compiler* compiler = nullptr) {
    std::vector<Compiler*> compilers;
    if (compiler != nullptr) compilers.push_back(compiler);
    return ResolveFromStore(*store_, record_.id, Device{*ParseSm(sm), driver}, ResolvePolicy{},
                            compilers);
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  KernelRecord record_;
};

TEST_F(ResolveFromStoreTest, ExactCubinWins) {
  Place(ArtifactKind::kCubin, "sm_86");
  Place(ArtifactKind::kCubin, "sm_80");
  Place(ArtifactKind::kPtx, "compute_86");
  absl::StatusOr<InProcessAnswer> r = Resolve("8.6");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rule, ServeRule::kExactSass);
  EXPECT_EQ(r->artifact->bytes, "artifact for sm_86");
  EXPECT_FALSE(r->needs_jit());
}

TEST_F(ResolveFromStoreTest, CompatibleCubinOfSameMajorLowerMinor) {
  Place(ArtifactKind::kCubin, "sm_80");
  Place(ArtifactKind::kCubin, "sm_86");
  Place(ArtifactKind::kPtx, "compute_86");
  absl::StatusOr<InProcessAnswer> r = Resolve("8.9");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rule, ServeRule::kCompatibleSass);
  EXPECT_EQ(r->artifact->bytes, "artifact for sm_86");  // the highest compatible minor
  EXPECT_NE(r->reason.find("sm_86"), std::string::npos) << r->reason;
}

TEST_F(ResolveFromStoreTest, PtxWithNeedsJitWhenNoCubinFits) {
  Place(ArtifactKind::kCubin, "sm_86");
  Place(ArtifactKind::kPtx, "compute_75");
  Place(ArtifactKind::kPtx, "compute_86");
  absl::StatusOr<InProcessAnswer> r = Resolve("9.0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rule, ServeRule::kPtxJit);
  EXPECT_TRUE(r->needs_jit());
  EXPECT_EQ(r->artifact->bytes, "artifact for compute_86");
}

TEST_F(ResolveFromStoreTest, SmallerDeviceIsNeverHandedNewerSass) {
  Place(ArtifactKind::kCubin, "sm_80");
  Place(ArtifactKind::kCubin, "sm_86");
  Place(ArtifactKind::kCubin, "sm_90a");
  Place(ArtifactKind::kPtx, "compute_80");
  absl::StatusOr<InProcessAnswer> r = Resolve("7.5");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  r = Resolve("9.0");  // sm_90a is for exactly 9.0
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->artifact->bytes, "artifact for sm_90a");
  r = Resolve("10.0");  // never sm_90a on 10.0: PTX instead
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rule, ServeRule::kPtxJit);
}

TEST_F(ResolveFromStoreTest, DeviceBelowDeclaredMinArchIsRefusedWithTheReason) {
  record_.arch.min_arch = 89;
  ASSERT_TRUE(store_->PutKernel(record_).ok());
  Place(ArtifactKind::kPtx, "compute_75");  // would load, but the kernel says 8.9+
  absl::StatusOr<InProcessAnswer> r = Resolve("8.6");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("needs SM 8.9"), absl::string_view::npos) << r.status();
}

TEST_F(ResolveFromStoreTest, AnInvalidDeviceSmIsRefusedBeforeAnyStoreIsRead) {
  Place(ArtifactKind::kPtx, "compute_75");  // would load on any SM it took
  for (Sm bad : {Sm{0, 0}, Sm{100, 0}, Sm{8, 10}, Sm{-1, 5}}) {
    absl::StatusOr<InProcessAnswer> r =
        ResolveFromStore(*store_, record_.id, Device{bad, 0}, ResolvePolicy{}, {});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad.ToString();
  }
}

TEST_F(ResolveFromStoreTest, OldDriverSkipsArtifactsItCannotLoad) {
  Place(ArtifactKind::kCubin, "sm_86", /*min_driver=*/13000);
  absl::StatusOr<InProcessAnswer> r = Resolve("8.6", /*driver=*/12080);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Resolve("8.6", 13000).ok());
  EXPECT_TRUE(Resolve("8.6", 0).ok());  // unknown driver: not filtered
}

TEST_F(ResolveFromStoreTest, MissWithoutToolkitSaysSo) {
  absl::StatusOr<InProcessAnswer> r = Resolve("8.6");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no toolkit"), absl::string_view::npos) << r.status();
}

TEST_F(ResolveFromStoreTest, UnknownKernelIsNotFound) {
  KernelSpec other;
  other.source = "nothing";
  absl::StatusOr<InProcessAnswer> r =
      ResolveFromStore(*store_, ComputeKernelId(other), Device{{8, 6}, 0}, ResolvePolicy{}, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("unknown"), absl::string_view::npos) << r.status();
}

TEST_F(ResolveFromStoreTest, MissCompilesForTheDeviceStoresAndThenServesExact) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(Toolkit::DefaultRoot());
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();
  std::unique_ptr<Compiler> compiler = NewNvrtcCompiler(*toolkit);
  absl::StatusOr<InProcessAnswer> r = Resolve("9.0", 0, compiler.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rule, ServeRule::kCompiled);
  EXPECT_EQ(*CubinSmArch(r->artifact->bytes), 90);
  absl::StatusOr<InProcessAnswer> again = Resolve("9.0");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->rule, ServeRule::kExactSass);
  EXPECT_EQ(again->artifact->bytes, r->artifact->bytes);
}

TEST_F(ResolveFromStoreTest, FindKernelByNameIdAndPrefix) {
  EXPECT_EQ(FindKernel(*store_, "saxpy")->id, record_.id);
  EXPECT_EQ(FindKernel(*store_, record_.id.Hex())->id, record_.id);
  EXPECT_EQ(FindKernel(*store_, record_.id.Hex().substr(0, 10))->id, record_.id);
  absl::StatusOr<KernelRecord> missing = FindKernel(*store_, "nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("kcache ls"), absl::string_view::npos);
}

TEST_F(ResolveFromStoreTest, NewestRecordOfANameWins) {
  KernelRecord edited = record_;
  edited.spec.source += "// edited\n";
  edited.id = ComputeKernelId(edited.spec);
  edited.registered_unix_ms = record_.registered_unix_ms + 1000;
  ASSERT_TRUE(store_->PutKernel(edited).ok());
  EXPECT_EQ(FindKernel(*store_, "saxpy")->id, edited.id);
}

}  // namespace
}  // namespace kcache
