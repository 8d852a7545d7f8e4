// engine/fatbin on hand-made bytes: fatbin.h's entries and payloads (plain, LZ4, zstd), every
// kind of damage, library.h's classification, and library_warm.h's plan by the serving rules.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/library.h"
#include "engine/fatbin/library_plan.h"
#include "engine/fatbin/ptx_sass.h"
#include "tests/testutil/fatbin_bytes.h"

namespace kcache::fatbin {
namespace {

using testing::EntryBytes;
using testing::FatbinBytes;
using testing::HandEntry;
using testing::Put;

const char kPtx[] = ".version 9.0\n.target sm_75\n.address_size 64\n\n// a kernel\n";

TEST(FatbinReaderTest, ListsEntriesWithKindArchVariantAndCompression) {
  std::string bytes = FatbinBytes({{1, 75, 0x11, std::string(kPtx) + '\0', Compression::kZstd},
                                   {1, 80, 0x11, kPtx, Compression::kLz4},
                                   {2, 89, 0x11, "ELF-ish", Compression::kNone},
                                   {2, 90, 0x11 | kFlagArchSpecific, "sass", Compression::kNone},
                                   {1, 100, 0x11 | kFlagFamily, kPtx, Compression::kNone},
                                   {8, 75, 0x11, "ltoir", Compression::kNone}});
  absl::StatusOr<Library> library = Library::FromBytes(bytes, "hand.fatbin");
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->format(), LibraryFormat::kFatbin);
  const std::vector<FatbinEntry>& e = library->entries();
  ASSERT_EQ(e.size(), 6u);
  EXPECT_EQ(e[0].target().ToString(), "compute_75");
  EXPECT_EQ(e[0].compression, Compression::kZstd);
  EXPECT_EQ(e[1].compression, Compression::kLz4);
  EXPECT_EQ(e[2].kind, EntryKind::kSass);
  EXPECT_EQ(e[2].target().ToString(), "sm_89");
  EXPECT_EQ(e[3].target().ToString(), "sm_90a");
  EXPECT_EQ(e[4].target().ToString(), "compute_100f");
  EXPECT_EQ(e[5].kind, EntryKind::kLtoir);
  // PTX reads the same compressed or not, without the NUL padding.
  for (int i : {0, 1, 4}) {
    absl::StatusOr<std::string> ptx = EntryPayload(e[i], "hand.fatbin");
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_EQ(*ptx, kPtx);
  }
  EXPECT_EQ(*EntryPayload(e[2], "hand.fatbin"), std::string("ELF-ish") + '\0');  // padded to 8
}

TEST(FatbinReaderTest, SeveralFatbinsWithPaddingBetweenThem) {
  std::string one = FatbinBytes({{1, 75, 0x11, kPtx, Compression::kNone}});
  std::string empty = FatbinBytes({});
  std::string bytes = empty + one + std::string(8, '\0') + one;
  std::vector<FatbinEntry> entries;
  ASSERT_TRUE(ParseFatbins(bytes, true, "x", 0, {}, &entries).ok());
  EXPECT_EQ(entries.size(), 2u);
}

TEST(FatbinReaderTest, EveryTruncationIsAnErrorNamingTheFile) {
  std::string bytes = FatbinBytes(
      {{1, 75, 0x11, kPtx, Compression::kZstd}, {2, 89, 0x11, "sass bytes", Compression::kNone}});
  for (size_t n = 4; n < bytes.size(); ++n) {
    absl::StatusOr<Library> library = Library::FromBytes(bytes.substr(0, n), "cut.fatbin");
    ASSERT_FALSE(library.ok()) << "truncated at " << n;
    EXPECT_TRUE(absl::StartsWith(library.status().message(), "cut.fatbin")) << library.status();
    EXPECT_TRUE(library.status().code() == absl::StatusCode::kDataLoss ||
                library.status().code() == absl::StatusCode::kInvalidArgument)
        << library.status();
  }
}

TEST(FatbinReaderTest, BadMagicIsInvalidArgument) {
  std::string bytes = FatbinBytes({{1, 75, 0x11, kPtx, Compression::kNone}});
  bytes[0] = 'X';
  absl::StatusOr<Library> library = Library::FromBytes(bytes, "magic.fatbin");
  ASSERT_EQ(library.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(library.status().message(), "neither a fatbin"))
      << library.status();
  std::vector<FatbinEntry> entries;
  absl::Status inside = ParseFatbins(bytes, false, "magic.fatbin", 0, {}, &entries);
  EXPECT_EQ(inside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(inside.message(), "no fatbin magic")) << inside;
}

TEST(FatbinReaderTest, LengthsPastTheEndAreDataLoss) {
  std::string bytes = FatbinBytes({{1, 75, 0x11, kPtx, Compression::kNone}});
  std::string data_size = bytes;
  Put<uint64_t>(data_size, 8, 1u << 30);
  absl::StatusOr<Library> a = Library::FromBytes(data_size, "a.fatbin");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(a.status().message(), "declares 1073741824 bytes of entries"))
      << a.status();
  std::string payload_size = bytes;
  Put<uint64_t>(payload_size, 16 + 8, uint64_t{1} << 62);
  absl::StatusOr<Library> b = Library::FromBytes(payload_size, "b.fatbin");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(b.status().message(), "runs past the end")) << b.status();
  std::string header_size = bytes;
  Put<uint32_t>(header_size, 16 + 4, 8);
  EXPECT_EQ(Library::FromBytes(header_size, "c.fatbin").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(FatbinReaderTest, AHugeDecompressedSizeIsRefusedBeforeAnythingIsAllocated) {
  std::string bytes = FatbinBytes({{1, 75, 0x11, kPtx, Compression::kZstd}});
  Put<uint64_t>(bytes, 16 + 0x38, uint64_t{1} << 40);
  absl::StatusOr<Library> library = Library::FromBytes(bytes, "huge.fatbin");
  ASSERT_EQ(library.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(library.status().message(), "more than the limit of 512 MiB"))
      << library.status();
}

TEST(FatbinReaderTest, APayloadThatDoesNotDecompressIsDataLoss) {
  for (Compression c : {Compression::kLz4, Compression::kZstd}) {
    std::string bytes = FatbinBytes({{1, 75, 0x11, std::string(400, 'p'), c}});
    Put<uint64_t>(bytes, 16 + 0x38, 300);  // declares less than the frame holds
    absl::StatusOr<Library> library = Library::FromBytes(bytes, "z.fatbin");
    ASSERT_TRUE(library.ok()) << library.status();
    absl::StatusOr<std::string> payload = EntryPayload(library->entries()[0], "z.fatbin");
    EXPECT_EQ(payload.status().code(), absl::StatusCode::kDataLoss) << CompressionName(c);
    EXPECT_TRUE(absl::StartsWith(payload.status().message(), "z.fatbin: entry at offset 16"))
        << payload.status();
  }
}

TEST(FatbinReaderTest, BothCompressionsAtOnceIsInvalidArgument) {
  std::string bytes = FatbinBytes({{1, 75, 0x11 | kFlagLz4, kPtx, Compression::kZstd}});
  EXPECT_EQ(Library::FromBytes(bytes, "two.fatbin").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FatbinReaderTest, AnythingElseIsNotALibrary) {
  absl::StatusOr<Library> library = Library::FromBytes("#!/bin/sh\n", "script");
  EXPECT_EQ(library.status().code(), absl::StatusCode::kInvalidArgument);
  std::string elf32 = std::string(
                          "\x7f"
                          "ELF\x01\x01\x01",
                          7) +
                      std::string(60, '\0');
  EXPECT_EQ(Library::FromBytes(elf32, "elf32").status().code(), absl::StatusCode::kInvalidArgument);
}

// The plan follows core/compat.h: same-major SASS of a lower minor runs; `a` SASS only on its
// own SM; the highest PTX not above the target is built.
TEST(LibraryPlanTest, FollowsTheServingRules) {
  std::string bytes = FatbinBytes({{1, 75, 0x11, kPtx, Compression::kNone},
                                   {1, 80, 0x11, kPtx, Compression::kNone},
                                   {2, 86, 0x11, "sass", Compression::kNone},
                                   {2, 90, 0x11 | kFlagArchSpecific, "sass", Compression::kNone},
                                   {1, 100, 0x11 | kFlagArchSpecific, kPtx, Compression::kNone}});
  absl::StatusOr<Library> library = Library::FromBytes(bytes, "plan.fatbin");
  ASSERT_TRUE(library.ok()) << library.status();
  absl::StatusOr<std::vector<Target>> targets = ParseTargetList("7.5,8.0,8.9,9.0,10.0,10.3");
  ASSERT_TRUE(targets.ok());
  std::vector<TargetPlan> plan = PlanLibrary(*library, *targets);
  using D = TargetPlan::Decision;
  ASSERT_EQ(plan.size(), 6u);
  EXPECT_EQ(plan[0].decision, D::kBuild);  // 7.5: compute_75 -> sm_75
  EXPECT_EQ(*plan[0].ptx_entry, 0u);
  EXPECT_EQ(plan[1].decision, D::kBuild);  // 8.0: compute_80, the highest not above
  EXPECT_EQ(*plan[1].ptx_entry, 1u);
  EXPECT_EQ(plan[2].decision, D::kHasSass);  // 8.9: sm_86 runs there
  EXPECT_EQ(*plan[2].sass_entry, 2u);
  EXPECT_EQ(plan[3].decision, D::kHasSass);  // 9.0: sm_90a runs on exactly 9.0
  EXPECT_EQ(plan[4].decision, D::kBuild);    // 10.0: compute_100a -> sm_100a
  EXPECT_EQ(*plan[4].ptx_entry, 4u);
  EXPECT_EQ(plan[4].build.ToString(), "sm_100a");
  EXPECT_EQ(plan[5].decision, D::kBuild);  // 10.3: compute_100a is 10.0's only: compute_80
  EXPECT_EQ(*plan[5].ptx_entry, 1u);
  EXPECT_EQ(plan[5].build.ToString(), "sm_103");
}

TEST(LibraryPlanTest, NothingToBuildFromSaysWhy) {
  std::string bytes = FatbinBytes({{1, 90, 0x11, kPtx, Compression::kNone}});
  absl::StatusOr<Library> library = Library::FromBytes(bytes, "high.fatbin");
  ASSERT_TRUE(library.ok());
  std::vector<TargetPlan> plan = PlanLibrary(*library, {*ParseTarget("8.6")});
  EXPECT_EQ(plan[0].decision, TargetPlan::Decision::kNoCode);
  EXPECT_TRUE(absl::StrContains(plan[0].note, "higher or another arch")) << plan[0].note;
}

// The driver JITs PTX with the options its header carries; kcache builds without them, so such
// PTX is never built (a lower PTX without options is not built in its place either: the driver
// would not run that one).
TEST(LibraryPlanTest, PtxCarryingJitOptionsIsLeftToTheDriver) {
  HandEntry with_options{1, 80, 0x11, kPtx, Compression::kNone, "-O1"};
  std::string bytes = FatbinBytes({{1, 75, 0x11, kPtx, Compression::kNone}, with_options});
  absl::StatusOr<Library> library = Library::FromBytes(bytes, "options.fatbin");
  ASSERT_TRUE(library.ok()) << library.status();
  ASSERT_EQ(library->entries()[1].jit_options, "-O1");
  std::vector<TargetPlan> plan = PlanLibrary(*library, {*ParseTarget("7.5"), *ParseTarget("8.6")});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].decision, TargetPlan::Decision::kBuild);  // 7.5: compute_75 has none
  EXPECT_EQ(*plan[0].ptx_entry, 0u);
  EXPECT_EQ(plan[1].decision, TargetPlan::Decision::kNoCode);  // 8.6: compute_80 has "-O1"
  EXPECT_FALSE(plan[1].ptx_entry.has_value());
  EXPECT_TRUE(absl::StrContains(plan[1].note, "carries JIT options (\"-O1\")")) << plan[1].note;
  EXPECT_TRUE(absl::StrContains(plan[1].note, "left to the driver")) << plan[1].note;
}

TEST(LibraryPlanTest, EachFatbinIsPlannedOnItsOwn) {
  // Two modules' fatbins one after another (as in a .so's .nv_fatbin): PTX only, and PTX with
  // SASS for 8.6.
  std::string first = FatbinBytes({{1, 75, 0x11, kPtx, Compression::kNone}});
  first.resize((first.size() + 7) & ~size_t{7}, '\0');
  std::string bytes = first + FatbinBytes({{1, 75, 0x11, kPtx, Compression::kNone},
                                           {2, 86, 0x11, "sass", Compression::kNone}});
  absl::StatusOr<Library> library = Library::FromBytes(bytes, "two.fatbin");
  ASSERT_TRUE(library.ok()) << library.status();
  ASSERT_EQ(library->entries().size(), 3u);
  EXPECT_EQ(library->entries()[0].fatbin, 0u);
  EXPECT_EQ(library->entries()[1].fatbin, 1u);
  EXPECT_EQ(library->entries()[2].fatbin, 1u);
  std::vector<TargetPlan> plan = PlanLibrary(*library, {*ParseTarget("8.6")});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].fatbin, 0u);
  EXPECT_EQ(plan[0].decision, TargetPlan::Decision::kBuild);  // the first module has no SASS
  EXPECT_EQ(*plan[0].ptx_entry, 0u);
  EXPECT_EQ(plan[1].fatbin, 1u);
  EXPECT_EQ(plan[1].decision, TargetPlan::Decision::kHasSass);  // the second's sm_86 is its own
  EXPECT_EQ(*plan[1].sass_entry, 2u);
}

// Pins the framing of a PTX module's id (docs/ptx-libraries.md, "Keys"): a change here changes
// every stored key.
TEST(PtxSassTest, ModuleIdKnownAnswer) {
  EXPECT_EQ(PtxModuleId("ptx", "", {"-O3"}).Hex(),
            "1ce58dedf465c68d50cb9f229c4a5964601ff420fc76ed5b7e0a3f454ca1d96d");
  EXPECT_NE(PtxModuleId("ptx", "", {"-O3"}), PtxModuleId("ptx", "", {"-O2"}));
  EXPECT_NE(PtxModuleId("ptx", "-ftz=1", {}), PtxModuleId("ptx-ftz=1", "", {}));
  ArtifactKey key = PtxSassKey(PtxModuleId("ptx", "", {}), *ParseTarget("8.9"), "tk");
  EXPECT_EQ(key.kind, ArtifactKind::kCubin);
  EXPECT_EQ(key.target.ToString(), "sm_89");
}

TEST(PtxSassTest, PtxTextTargetReadsTheTargetDirective) {
  EXPECT_EQ(PtxTextTarget(kPtx)->ToString(), "compute_75");
  EXPECT_EQ(PtxTextTarget("//\n// Generated\n.version 9.0\n  .target sm_90a, debug\n")->ToString(),
            "compute_90a");
  EXPECT_EQ(PtxTextTarget(".version 9.0\n.target\tsm_100f\n")->ToString(), "compute_100f");
  absl::Status none = PtxTextTarget("int main() {}\n").status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(none.message(), "not PTX")) << none;
  absl::Status odd = PtxTextTarget(".version 9.0\n.target compute_75\n").status();
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(odd.message(), "'compute_75'")) << odd;
}

TEST(PtxSassTest, ArtifactsCarryTheirOrigin) {
  Artifact a = PtxSassArtifact(PtxSassKey(PtxModuleId("p", "", {}), *ParseTarget("8.6"), "tk"),
                               {"/lib/libx.so", *ParseTarget("compute_75")}, "cubin", "", 1, 13000);
  ASSERT_TRUE(IsPtxSassArtifact(a.meta));
  EXPECT_EQ(PtxSassOriginOf(a.meta).library, "/lib/libx.so");
  EXPECT_EQ(PtxSassOriginOf(a.meta).ptx.ToString(), "compute_75");
  ArtifactMeta kernel;
  kernel.lowered_names = {{"softmax<float>", "_Z7softmaxIfEvv"}};
  EXPECT_FALSE(IsPtxSassArtifact(kernel));
}

}  // namespace
}  // namespace kcache::fatbin
