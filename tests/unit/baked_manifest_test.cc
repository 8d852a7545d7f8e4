// Baked manifests (docs/manifest.md, "Baked manifests"): BakeManifest writes what
// LoadManifestKernels reads back as the YAML manifest's kernels, field for field (so the
// daemon computes the same kernel ids from them); a damaged or other-version file is refused
// with what to do; a baked manifest keeps the sources it was baked with until baked again.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/lib/api_convert.h"
#include "client/lib/known_kernel_ids.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "kcache/kcache.h"
#include "kcache/v1/baked_manifest.pb.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache::client {
namespace {

std::string BundledManifest() { return testing::SourcePath("kernels/manifest.yaml"); }

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `baked` written as version 2 (magic, checksum, message) or as version 1 (magic, message).
void WriteBaked(const std::string& path, v1::BakedManifest baked, int version) {
  baked.set_version(static_cast<uint32_t>(version));
  std::string payload = baked.SerializeAsString();
  if (version == 1) return Write(path, "KCBAKED1" + payload);
  uint64_t checksum = PayloadChecksum(payload);
  std::string bytes = "KCBAKED2";
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((checksum >> (8 * i)) & 0xff));
  Write(path, bytes + payload);
}

void ExpectSameKernels(const std::vector<KernelSource>& a, const std::vector<KernelSource>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].name);
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].source_name, b[i].source_name);
    EXPECT_EQ(a[i].source, b[i].source);
    EXPECT_EQ(a[i].headers, b[i].headers);
    EXPECT_EQ(a[i].options, b[i].options);
    EXPECT_EQ(a[i].name_expressions, b[i].name_expressions);
    EXPECT_EQ(a[i].min_arch, b[i].min_arch);
    EXPECT_EQ(a[i].max_arch, b[i].max_arch);
    EXPECT_EQ(a[i].want_ltoir, b[i].want_ltoir);
    EXPECT_EQ(ComputeKernelId(ToCoreSpec(a[i])), ComputeKernelId(ToCoreSpec(b[i])));
  }
}

TEST(BakedManifestTest, ReadsBackTheYamlManifestsKernels) {
  testing::TempDir dir;
  std::string baked = dir / "manifest.kcb";
  ASSERT_TRUE(BakeManifest(BundledManifest(), baked).ok());
  absl::StatusOr<std::vector<KernelSource>> from_yaml = LoadManifestKernels(BundledManifest());
  absl::StatusOr<std::vector<KernelSource>> from_baked = LoadManifestKernels(baked);
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status();
  ASSERT_TRUE(from_baked.ok()) << from_baked.status();
  ExpectSameKernels(*from_yaml, *from_baked);
}

TEST(BakedManifestTest, KeepsTheSourcesItWasBakedWithUntilBakedAgain) {
  testing::TempDir dir;
  Write(dir / "k.cu", "extern \"C\" __global__ void k() {}\n");
  Write(dir / "manifest.yaml", "version: 1\nkernels:\n  - name: k\n    source: k.cu\n");
  std::string baked = dir / "manifest.kcb";
  ASSERT_TRUE(BakeManifest(dir / "manifest.yaml", baked).ok());
  Write(dir / "k.cu", "extern \"C\" __global__ void k() { /* edited */ }\n");
  absl::StatusOr<std::vector<KernelSource>> stale = LoadManifestKernels(baked);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(absl::StrContains(stale->front().source, "edited")) << "read the source file";
  ASSERT_TRUE(BakeManifest(dir / "manifest.yaml", baked).ok());
  absl::StatusOr<std::vector<KernelSource>> fresh = LoadManifestKernels(baked);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(absl::StrContains(fresh->front().source, "edited"));
  EXPECT_NE(ComputeKernelId(ToCoreSpec(stale->front())),
            ComputeKernelId(ToCoreSpec(fresh->front())));
}

// The file carries each kernel's id, computed when baked, and LoadManifestKernels hands it to
// the client (known_kernel_ids.h) so a worker need not hash its sources on start; a bake
// without ids (an older kcache's) still loads, its ids then computed when asked.
TEST(BakedManifestTest, CarriesEachKernelsIdForTheClient) {
  testing::TempDir dir;
  std::string baked_path = dir / "manifest.kcb";
  ASSERT_TRUE(BakeManifest(BundledManifest(), baked_path).ok());
  std::string bytes = Read(baked_path);
  v1::BakedManifest baked;
  ASSERT_EQ(bytes.substr(0, 8), "KCBAKED2");
  ASSERT_TRUE(baked.ParseFromString(bytes.substr(16)));
  absl::StatusOr<std::vector<KernelSource>> from_yaml = LoadManifestKernels(BundledManifest());
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status();
  ASSERT_EQ(baked.kernel_ids_size(), static_cast<int>(from_yaml->size()));
  for (size_t i = 0; i < from_yaml->size(); ++i) {
    EXPECT_EQ(baked.kernel_ids(static_cast<int>(i)),
              ComputeKernelId(ToCoreSpec((*from_yaml)[i])).Bytes())
        << (*from_yaml)[i].name;
  }

  // The ids are taken as baked: one replaced in the file is the one the client then asks by,
  // for that very spec only (the visible sign that the bake's ids are used).
  KernelSource first = (*from_yaml)[0];
  first.source += "\n// a source of this test's own\n";
  baked.mutable_kernels(0)->set_source(first.source);
  std::string vouched(KernelId::kSize, '\x7e');
  baked.set_kernel_ids(0, vouched);
  WriteBaked(baked_path, baked, 2);
  absl::StatusOr<std::vector<KernelSource>> loaded = LoadManifestKernels(baked_path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(KnownKernelId(ToCoreSpec((*loaded)[0])).Bytes(), vouched);
  KernelSource changed = (*loaded)[0];
  changed.options.push_back("-DCHANGED=1");
  EXPECT_EQ(KnownKernelId(ToCoreSpec(changed)), ComputeKernelId(ToCoreSpec(changed)));

  // A version 1 file (no checksum: its ids, were there any, are not used) loads all the same.
  KernelSource second = (*from_yaml)[1];
  second.source += "\n// another source of this test's own\n";
  baked.mutable_kernels(1)->set_source(second.source);
  baked.set_kernel_ids(1, vouched);
  WriteBaked(baked_path, baked, 1);
  loaded = LoadManifestKernels(baked_path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->size(), from_yaml->size());
  EXPECT_EQ(KnownKernelId(ToCoreSpec((*loaded)[1])), ComputeKernelId(ToCoreSpec(second)));
}

TEST(BakedManifestTest, RefusesADamagedFile) {
  testing::TempDir dir;
  std::string baked = dir / "manifest.kcb";
  ASSERT_TRUE(BakeManifest(BundledManifest(), baked).ok());
  std::string bytes = Read(baked);
  Write(baked, bytes.substr(0, bytes.size() / 2));  // cut inside a source
  absl::StatusOr<std::vector<KernelSource>> loaded = LoadManifestKernels(baked);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(loaded.status())) << loaded.status();
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "kcache bake-manifest"))
      << loaded.status();
  // One byte changed inside a source still parses: the checksum refuses it.
  std::string flipped = bytes;
  size_t at = flipped.find("__global__");
  ASSERT_NE(at, std::string::npos);
  flipped[at] = '_' ^ 1;
  Write(baked, flipped);
  loaded = LoadManifestKernels(baked);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "checksum")) << loaded.status();
}

TEST(BakedManifestTest, RefusesAnotherVersion) {
  testing::TempDir dir;
  std::string baked = dir / "manifest.kcb";
  Write(baked, std::string("KCBAKED1") + std::string("\x08\x02", 2));  // version: 2, no kernels
  absl::StatusOr<std::vector<KernelSource>> loaded = LoadManifestKernels(baked);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "version 2")) << loaded.status();
}

TEST(BakedManifestTest, BakingABadManifestWritesNothing) {
  testing::TempDir dir;
  Write(dir / "manifest.yaml", "version: 1\nkernels:\n  - name: k\n    source: missing.cu\n");
  std::string baked = dir / "manifest.kcb";
  absl::Status s = BakeManifest(dir / "manifest.yaml", baked);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "missing.cu")) << s;
  EXPECT_FALSE(std::ifstream(baked).good());
}

}  // namespace
}  // namespace kcache::client
