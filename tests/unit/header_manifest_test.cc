// engine/keys/header_manifest.h: a manifest made from a dependency file, matched until a
// header changes or goes, and refused for a time macro or a header changed during the compile.
#include "engine/keys/header_manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "absl/time/clock.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

using testing::TempDir;

TEST(ManifestTest, MatchesUntilAHeaderChangesOrGoes) {
  TempDir tmp;
  tmp.Write("a.h", "int a;\n");
  tmp.Write("b.h", "int b;\n");
  BaseDirs dirs{tmp.path(), {}};
  FileDigests digests("");
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<HeaderManifest> manifest =
      MakeManifest(DepFile{{"x.o"}, {tmp / "a.h", "b.h"}}, dirs, digests, &reason);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ((*manifest)[0].first, "@cwd@/a.h");
  std::string difference;
  EXPECT_TRUE(ManifestMatches(*manifest, dirs, Environment{}, digests, &difference));
  tmp.Write("b.h", "int b2;\n");
  EXPECT_FALSE(ManifestMatches(*manifest, dirs, Environment{}, digests, &difference));
  EXPECT_NE(difference.find("b.h changed"), std::string::npos) << difference;
  std::filesystem::remove(tmp / "a.h");
  EXPECT_FALSE(ManifestMatches(*manifest, dirs, Environment{}, digests, &difference));
  EXPECT_NE(difference.find("missing"), std::string::npos) << difference;
}

// Why MakeManifest refuses a dependency file naming one header holding `text` (kNone when it
// does not), for a compile started at `compiled_from`.
UncachedReason ManifestRefusal(const std::string& text,
                               absl::Time compiled_from = absl::InfiniteFuture()) {
  TempDir tmp;
  tmp.Write("t.h", text);
  BaseDirs dirs{tmp.path(), {}};
  FileDigests digests("");
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<HeaderManifest> manifest =
      MakeManifest(DepFile{{"x.o"}, {"t.h"}}, dirs, digests, &reason, compiled_from);
  return manifest.ok() ? UncachedReason::kNone : reason;
}

TEST(ManifestTest, TimeMacrosAreNotCached) {
  EXPECT_EQ(ManifestRefusal("const char* built = __DATE__;\n"), UncachedReason::kTimeMacros);
}

TEST(ManifestTest, HeaderChangedAfterTheCompileStartedIsNotStored) {
  EXPECT_EQ(ManifestRefusal("int t;\n", absl::Now() - absl::Hours(1)),
            UncachedReason::kInputChanged);
  EXPECT_EQ(ManifestRefusal("int t;\n", absl::Now() + absl::Seconds(2)), UncachedReason::kNone);
}

}  // namespace
}  // namespace kcache::objects
