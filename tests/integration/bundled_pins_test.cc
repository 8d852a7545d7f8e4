// The bundled kernels' ids and a few of their cubins, pinned: moving code between folders,
// reformatting it or refactoring the compile path must not change what a warmed image holds
// (an id change orphans every stored artifact; a byte change means different code runs).
// The ids depend only on kernels/manifest.yaml and the files it names; the cubin checksums
// also on the toolkit, so they are checked only with the toolkit they were taken with.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/manifest.h"
#include "core/target.h"
#include "engine/compile/compiler.h"
#include "tests/testutil/toolkit.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

// Taken with the layout before engine/ existed (commit f2764ad), from `kcache ls --json`.
const std::map<std::string, std::string> kPinnedIds = {
    {"timestep_embedding", "ae73f6a5fab197f981e504363ec8370f52321930b9c73c90a7003801d188386d"},
    {"geglu", "2c5e8c2c769364b00e77705d714409a9e3cc95be5d655706d764c21f1e99c67b"},
    {"geglu.tanh", "52387dbcaa0e2c71ee4f824f9e0aa6d03a4eb5b67ac75fc7581dd9028c2c91a9"},
    {"group_norm", "4be3e51d367a84efe9a86fee8c941676061efa91dded9d435018ac9bdecd7a5d"},
    {"norm", "91eeb7ef4b6934ecf434ab5f3756694d11eb8988e697ece3892ff815dfb21999"},
    {"softmax", "4126d6dcad9b5f4452ce934059cd2e71c618ce8b5bdf5bb66a570f77d6a69652"},
    {"attention", "7d9f23bbdb6aebc8f1d81e60c688cc81a5b74e85c413e128290983e183f02ae0"},
    {"attention.fp16_accum", "628c809a838dacc081281541a2600baa6984665a69804cd6af189e19ad456360"},
    {"rotary_embedding", "1d864c4078d4d1f456da03cdfbb41f199fcc1efdf19474c7315c3cf985a05485"},
    {"linear_bf16_sm80", "c4f5fb972f1607224a4470b4da11b8cd6cf0b088fadd1de996e0df358859748a"},
    {"fp8_e4m3", "50bcb2b31f9d7929a4e1ded69bd1b5008caf1a9c8d20925887ad9b6b7489a2cc"},
    {"moe_routing", "fb747a57e53bc6faedbca9f487ef2cc1829b4ab030d6404c27b8a33d46029c30"},
};

// sm_86 cubins' XXH3-64 checksums, made by this toolkit build.
constexpr char kPinnedToolkit[] = "nvrtc-13.0+9ca007cdb201";
const std::map<std::string, uint64_t> kPinnedSm86Cubins = {
    {"geglu", 0x9731da7ffde54193},
    {"softmax", 0x8c6dee0d9b37f19e},
    {"attention.fp16_accum", 0xcc206112faeea2fb},
    {"moe_routing", 0x49d3a4ffd859f888},  // CUB-heavy: the one -frandom-seed keeps stable
};

Manifest BundledManifest() {
  absl::StatusOr<Manifest> manifest = LoadManifest(testing::SourcePath("kernels/manifest.yaml"));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  return manifest.ok() ? *std::move(manifest) : Manifest{};
}

TEST(BundledPins, KernelIdsAreUnchanged) {
  Manifest manifest = BundledManifest();
  ASSERT_EQ(manifest.kernels.size(), kPinnedIds.size());
  for (const ManifestKernel& k : manifest.kernels) {
    auto pinned = kPinnedIds.find(k.record.spec.name);
    ASSERT_NE(pinned, kPinnedIds.end()) << "a bundled kernel not pinned: " << k.record.spec.name;
    EXPECT_EQ(k.record.id.Hex(), pinned->second) << k.record.spec.name;
    EXPECT_EQ(ComputeKernelId(k.record.spec).Hex(), pinned->second) << k.record.spec.name;
  }
}

TEST(BundledPins, Sm86CubinsAreUnchanged) {
  const absl::StatusOr<std::shared_ptr<const Toolkit>>& toolkit = testing::SharedToolkit();
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();
  if ((*toolkit)->identity().id != kPinnedToolkit) {
    GTEST_SKIP() << "the pins were taken with " << kPinnedToolkit << "; this toolkit is "
                 << (*toolkit)->identity().id;
  }
  std::unique_ptr<Compiler> compiler = NewNvrtcCompiler(*toolkit);
  absl::StatusOr<Target> sm86 = ParseTarget("sm_86");
  ASSERT_TRUE(sm86.ok());
  int checked = 0;
  for (const ManifestKernel& k : BundledManifest().kernels) {
    auto pinned = kPinnedSm86Cubins.find(k.record.spec.name);
    if (pinned == kPinnedSm86Cubins.end()) continue;
    absl::StatusOr<CompileOutput> out =
        compiler->Compile(CompileJob{k.record.spec, k.record.id, *sm86, false, {}, {}});
    ASSERT_TRUE(out.ok()) << k.record.spec.name << ": " << out.status();
    bool found = false;
    for (const Artifact& a : out->artifacts) {
      if (a.meta.key.kind != ArtifactKind::kCubin) continue;
      found = true;
      EXPECT_EQ(a.meta.checksum, pinned->second) << k.record.spec.name << " sm_86 cubin changed";
    }
    EXPECT_TRUE(found) << k.record.spec.name << ": no cubin";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(kPinnedSm86Cubins.size()));
}

}  // namespace
}  // namespace kcache
