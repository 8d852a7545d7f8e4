// What a launcher keys of an observed compile (engine/keys/observed_manifest.h), from logs
// written here: which reads become manifest lines, which make a compile uncached, and that
// ManifestMatches finds each line true again or says which is not.
#include "engine/keys/observed_manifest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/observe/observed_reads.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

class ObservedManifestTest : public ::testing::Test {
 protected:
  ObservedManifestTest() : dirs_{tmp_ / "build", {}}, digests_("") {
    fs::create_directories(dirs_.cwd);
    compile_.dirs = &dirs_;
    compile_.env = &env_;
    compile_.temp_dir = tmp_ / "private";
    compile_.library = tmp_ / "lib/libkcache-observe.so";
    compile_.outputs = {dirs_.cwd + "/x.o"};
    compile_.linkers = {"/usr/bin/ld"};
  }

  // The manifest of `log` (its lines; "S 1 0\t/usr/bin/cc" is prepended), or the reason.
  absl::StatusOr<HeaderManifest> Of(const std::string& log) {
    reason_ = UncachedReason::kNone;
    observe::ObservedReads reads =
        observe::ParseObservation(absl::StrCat("S 1 0\t/usr/bin/cc\n", log));
    return ObservedManifest(reads, compile_, digests_, absl::InfiniteFuture(), &reason_);
  }

  // The manifest's value for `path` (normalized), or "" when it has no line for it.
  static std::string ValueOf(const HeaderManifest& manifest, const std::string& path) {
    for (const auto& [name, value] : manifest) {
      if (name == path) return value;
    }
    return "";
  }

  bool Matches(const HeaderManifest& manifest, std::string* difference = nullptr) {
    return ManifestMatches(manifest, dirs_, env_, digests_, difference);
  }

  TempDir tmp_;
  BaseDirs dirs_;
  FileDigests digests_;
  Environment env_;
  ObservedCompile compile_;
  UncachedReason reason_ = UncachedReason::kNone;
};

TEST_F(ObservedManifestTest, FilesReadAreDigestedAsTheirReadersReadThem) {
  std::string header = tmp_.Write("inc/h.h", "#define H 1\n");
  std::string local = tmp_.Write("build/local.h", "int local;\n");
  std::string object = tmp_.Write("lib/a.o", "not really an object");
  absl::StatusOr<HeaderManifest> manifest =
      Of(absl::StrCat("R 1 ", header, "\nR 1 ", local, "\nB 1 /lib/x86_64-linux-gnu/libc.so.6\n",
                      "S 2 1\t/usr/bin/ld\nR 2 ", object, "\n"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(ValueOf(*manifest, header).size(), kDigestHexDigits);
  EXPECT_NE(ValueOf(*manifest, "@cwd@/local.h"), "");  // under the working directory
  EXPECT_TRUE(absl::StartsWith(ValueOf(*manifest, "/lib/x86_64-linux-gnu/libc.so.6"), kToolPrefix));
  EXPECT_TRUE(absl::StartsWith(ValueOf(*manifest, "/usr/bin/cc"), kToolPrefix));
  EXPECT_TRUE(absl::StartsWith(ValueOf(*manifest, object), kLinkInputPrefix));
  EXPECT_TRUE(Matches(*manifest));
  tmp_.Write("inc/h.h", "#define H 2\n");
  std::string difference;
  EXPECT_FALSE(Matches(*manifest, &difference));
  EXPECT_EQ(difference, absl::StrCat("header ", header, " changed"));
}

TEST_F(ObservedManifestTest, OutputsTemporariesAndDevicesAreNotInputs) {
  tmp_.Write("private/tmpxft.ii", "x");
  tmp_.Write("build/x.o", "x");
  absl::StatusOr<HeaderManifest> manifest = Of(absl::StrCat(
      "R 1 ", tmp_ / "private/tmpxft.ii", "\nA 1 ", tmp_ / "private/other", "\nR 1 ", dirs_.cwd,
      "/x.o\nW 1 ", tmp_ / "private/made.h", "\nR 1 ", tmp_ / "private/made.h",
      "\nR 1 /dev/null\nR 1 /proc/self/maps\nR 1 /proc/1/status\nR 1 ", compile_.library, "\n"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  // Only the compiler itself remains.
  ASSERT_EQ(manifest->size(), 1u) << manifest->front().first;
  EXPECT_EQ(manifest->front().first, "/usr/bin/cc");
}

TEST_F(ObservedManifestTest, PathsLookedForAreAbsentUpToTheirFirstMissingDirectory) {
  fs::create_directories(tmp_ / "inc/a");
  absl::StatusOr<HeaderManifest> manifest =
      Of(absl::StrCat("A 1 ", tmp_ / "inc/a/h.h", "\nA 1 ", tmp_ / "inc/none/deep/h.h", "\nA 1 ",
                      tmp_ / "inc/none/other.h", "\nX 1 ", tmp_ / "inc", "\n"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(ValueOf(*manifest, tmp_ / "inc/a/h.h"), kAbsentFact);
  EXPECT_EQ(ValueOf(*manifest, tmp_ / "inc/none"), kAbsentFact);
  EXPECT_EQ(ValueOf(*manifest, tmp_ / "inc/none/deep/h.h"), "");
  EXPECT_EQ(ValueOf(*manifest, tmp_ / "inc"), absl::StrCat(kExistsPrefix, "dir"));
  EXPECT_TRUE(Matches(*manifest));
  tmp_.Write("inc/none/unrelated.h", "");  // the directory now exists
  std::string difference;
  EXPECT_FALSE(Matches(*manifest, &difference));
  EXPECT_EQ(difference, absl::StrCat(tmp_ / "inc/none", " exists now"));
}

TEST_F(ObservedManifestTest, EnvironmentTheCallerGaveIsKeyedWhatACompileSetIsNot) {
  env_ = {{"CPATH", dirs_.cwd + "/inc"}, {"TERM", "xterm"}, {"TOP", "/user/value"}};
  absl::StatusOr<HeaderManifest> manifest =
      Of(absl::StrCat("G 1 CPATH=", dirs_.cwd,
                      "/inc\n"
                      "g 1 SOURCE_DATE_EPOCH\n"
                      "G 1 TERM=xterm\n"              // how diagnostics look: not keyed
                      "G 1 TMPDIR=/anything\n"        // where temporaries go: not keyed
                      "G 1 KCACHE_STORE=/s\n"         // kcache's own
                      "G 2 _HERE_=/usr/local/cuda\n"  // set by nvcc for its children
                      "G 2 TOP=/usr/local/cuda/..\n"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(ValueOf(*manifest, "$CPATH"), "=@cwd@/inc");
  EXPECT_EQ(ValueOf(*manifest, "$SOURCE_DATE_EPOCH"), "(unset)");
  for (const char* name : {"$TERM", "$TMPDIR", "$KCACHE_STORE", "$_HERE_", "$TOP"}) {
    EXPECT_EQ(ValueOf(*manifest, name), "") << name;
  }
  EXPECT_TRUE(Matches(*manifest));
  env_["SOURCE_DATE_EPOCH"] = "0";
  std::string difference;
  EXPECT_FALSE(Matches(*manifest, &difference));
  EXPECT_EQ(difference, "environment SOURCE_DATE_EPOCH differs: recorded '(unset)', now '=0'");
}

TEST_F(ObservedManifestTest, PwdCountsOnlyWhenItNamesTheWorkingDirectory) {
  fs::create_directory_symlink(dirs_.cwd, tmp_ / "link");
  env_ = {{"PWD", tmp_ / "link"}};
  absl::StatusOr<HeaderManifest> manifest = Of(absl::StrCat("G 1 PWD=", tmp_ / "link", "\n"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(ValueOf(*manifest, "$PWD"), absl::StrCat("=", tmp_ / "link"));
  env_["PWD"] = dirs_.cwd;
  EXPECT_FALSE(Matches(*manifest));
  EXPECT_EQ(EnvironmentFact("PWD", env_, dirs_), "=@cwd@");
  env_["PWD"] = "/";  // stale: compilers use the real working directory then
  EXPECT_EQ(EnvironmentFact("PWD", env_, dirs_), "(not the working directory)");
}

TEST_F(ObservedManifestTest, LinksRealpathsAndListingsAreCheckedAgain) {
  std::string target = tmp_.Write("real/h.h", "x");
  fs::create_symlink(target, tmp_ / "alias.h");
  tmp_.Write("listed/a", "");
  absl::StatusOr<HeaderManifest> manifest = Of(absl::StrCat(
      "L 1 ", tmp_ / "alias.h", "\t", target, "\nP 1 ", tmp_ / "real/h.h", "\t", target, "\nP 1 ",
      tmp_ / "alias.h", "\t", target, "\nD 1 ", tmp_ / "listed", "\nK 1 ", tmp_ / "alias.h", "\n"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_TRUE(Matches(*manifest));
  tmp_.Write("listed/b", "");
  EXPECT_FALSE(Matches(*manifest));
  fs::remove(tmp_ / "listed/b");
  EXPECT_TRUE(Matches(*manifest));
  std::string other = tmp_.Write("other/h.h", "x");
  fs::remove(tmp_ / "alias.h");
  fs::create_symlink(other, tmp_ / "alias.h");
  EXPECT_FALSE(Matches(*manifest));
}

TEST_F(ObservedManifestTest, WhatCannotBeKeyedLeavesTheCompileUncached) {
  struct Case {
    std::string log;
    UncachedReason reason;
  };
  std::string header = tmp_.Write("h.h", "x");
  for (const Case& c : std::vector<Case>{
           {"U 1 /opt/cc\tstatically linked\n", UncachedReason::kUnreadableInput},
           {"x 1 7\t/opt/cc\n", UncachedReason::kUnreadableInput},  // never started
           {"R 1 /proc/cpuinfo\n", UncachedReason::kUnreadableInput},
           {"T 1 \n", UncachedReason::kTimeMacros},
           {absl::StrCat("A 1 ", header, "\nR 1 ", header, "\n"), UncachedReason::kInputChanged},
           {"F 1 13\t/nonexistent-kcache-path\n", UncachedReason::kUnreadableInput},
           // a file written besides the command's outputs: a hit would not write it
           {absl::StrCat("W 1 ", dirs_.cwd, "/x.ii\n"), UncachedReason::kKeepTemps},
       }) {
    EXPECT_FALSE(Of(c.log).ok()) << c.log;
    EXPECT_EQ(reason_, c.reason) << c.log;
  }
  // nvcc's device front ends read the clock for their own timing.
  EXPECT_TRUE(Of("S 3 1\t/usr/local/cuda/nvvm/bin/cicc\nT 3 \n").ok());
  observe::ObservedReads nothing;
  EXPECT_FALSE(
      ObservedManifest(nothing, compile_, digests_, absl::InfiniteFuture(), &reason_).ok());
}

TEST_F(ObservedManifestTest, TheSameReadsGiveTheSameManifest) {
  std::string a = tmp_.Write("a.h", "a"), b = tmp_.Write("b.h", "b");
  absl::StatusOr<HeaderManifest> one = Of(absl::StrCat("R 1 ", a, "\nR 1 ", b, "\n"));
  absl::StatusOr<HeaderManifest> two = Of(absl::StrCat("R 1 ", b, "\nR 1 ", a, "\nR 1 ", a, "\n"));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(*one, *two);
  EXPECT_EQ(ManifestId(*one), ManifestId(*two));
}

TEST(ObservationTest, EnvironmentPreloadsTheObserverAndGivesATemporaryDirectory) {
  TempDir tmp;
  std::string library = tmp.Write("libkcache-observe.so", "");
  absl::StatusOr<Observation> observation = Observation::Begin(library, {"/bin/kcache"});
  ASSERT_TRUE(observation.ok()) << observation.status();
  std::string preload = "LD_PRELOAD=/lib/libjemalloc.so", tmpdir = "TMPDIR=/x", keep = "A=b";
  char* base[] = {preload.data(), tmpdir.data(), keep.data(), nullptr};
  std::vector<std::string> env = observation->Environment(base);
  std::string joined = absl::StrJoin(env, "\n");
  EXPECT_NE(joined.find(absl::StrCat("LD_PRELOAD=", library, ":/lib/libjemalloc.so")),
            std::string::npos)
      << joined;
  EXPECT_NE(joined.find(absl::StrCat("TMPDIR=", observation->temp_dir())), std::string::npos);
  EXPECT_EQ(joined.find("TMPDIR=/x"), std::string::npos);
  EXPECT_NE(joined.find("KCACHE_OBSERVE_SKIP=/bin/kcache"), std::string::npos);
  EXPECT_NE(joined.find("A=b"), std::string::npos);
  std::string dir = observation->temp_dir();
  EXPECT_TRUE(fs::is_directory(dir));
  observation = absl::InternalError("gone");
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(Observation::Begin("", {}).ok());
}

// kcache's NVRTC and driver stand-ins, which `kcache run` preloads, live in nvrtc/ and cuda/
// beside the observer and are left out of a compile's LD_PRELOAD: no manifest names a library of
// kcache's own.
TEST(ObservationTest, EnvironmentLeavesOutTheStandIns) {
  TempDir tmp;
  std::string library = tmp.Write("lib/kcache/libkcache-observe.so", "");
  EXPECT_EQ(FindNvrtcStandIn(library), "");
  EXPECT_EQ(FindCudaStandIn(library), "");
  std::string stand_in = tmp.Write("lib/kcache/nvrtc/libnvrtc.so.13", "");
  std::string stand_in12 = tmp.Write("lib/kcache/nvrtc/libnvrtc.so.12", "");
  std::string driver_stand_in = tmp.Write("lib/kcache/cuda/libcuda.so.1", "");
  EXPECT_EQ(FindNvrtcStandIn(library), stand_in);
  EXPECT_EQ(FindNvrtcStandIn(library, 12), stand_in12);
  EXPECT_EQ(FindCudaStandIn(library), driver_stand_in);
  fs::create_symlink(stand_in, tmp / "link.so");
  absl::StatusOr<Observation> observation = Observation::Begin(library, {});
  ASSERT_TRUE(observation.ok()) << observation.status();
  std::string preload = absl::StrCat("LD_PRELOAD=", stand_in, ":/lib/libjemalloc.so ",
                                     tmp / "link.so", ":", driver_stand_in, ":", stand_in12);
  char* base[] = {preload.data(), nullptr};
  std::vector<std::string> env = observation->Environment(base);
  EXPECT_NE(std::find(env.begin(), env.end(),
                      absl::StrCat("LD_PRELOAD=", library, ":/lib/libjemalloc.so")),
            env.end())
      << absl::StrJoin(env, "\n");
}

}  // namespace
}  // namespace kcache::objects
