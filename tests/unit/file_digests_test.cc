// engine/keys/file_digests.h: time macros found at every offset, the memo across processes
// and edits, tools' digests, large files, the first mismatch in order, damaged memo lines.
#include "engine/keys/file_digests.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/xxh128.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The scan for time macros looks at 16 positions at a time: a macro at any offset (across a
// block's end, in the tail) is found, and near misses are not taken for one.
TEST(FileDigestsTest, TimeMacrosAreFoundAtEveryOffsetAndNearMissesAreNot) {
  TempDir tmp;
  FileDigests digests("");
  int n = 0;
  auto has_macro = [&](const std::string& text) {
    return digests.Digest(tmp.Write(absl::StrCat("f", n++, ".h"), text))->has_time_macro;
  };
  for (const char* macro : {"__DATE__", "__TIME__", "__TIMESTAMP__"}) {
    for (int offset = 0; offset < 40; ++offset) {
      EXPECT_TRUE(has_macro(std::string(offset, '_') + macro)) << macro << " at " << offset;
      EXPECT_TRUE(has_macro(std::string(offset, 'x') + macro + std::string(offset % 7, ' ')))
          << macro << " at " << offset;
    }
  }
  for (const char* near : {"__DATE_", "_DATE__", "__TIMESIZE", "__TIME_T_TYPE", "__TIMESTAMP_",
                           "__D", "__T", "DATE__ TIME__", ""}) {
    for (int offset = 0; offset < 20; ++offset) {
      EXPECT_FALSE(has_macro(std::string(offset, 'x') + near + "\n")) << near << " at " << offset;
    }
  }
}

// A file is read a piece at a time (256 KiB): a macro across the seam of two pieces is found,
// and its digest is the XXH3-128 of the whole.
TEST(FileDigestsTest, TimeMacrosAcrossTheSeamOfTwoReadsAreFound) {
  TempDir tmp;
  FileDigests digests("");
  constexpr size_t kPiece = size_t{256} << 10;
  int n = 0;
  for (const std::string macro : {"__DATE__", "__TIMESTAMP__"}) {
    for (size_t before = 1; before < macro.size(); ++before) {
      std::string text = std::string(kPiece - before, 'x') + macro + std::string(kPiece, 'y');
      absl::StatusOr<FileDigest> digest =
          digests.Digest(tmp.Write(absl::StrCat("seam", n++, ".h"), text));
      ASSERT_TRUE(digest.ok()) << digest.status();
      EXPECT_TRUE(digest->has_time_macro) << macro << " from " << before << " before the seam";
      EXPECT_EQ(digest->hex, Xxh128Hex(text));
    }
  }
  std::string near = std::string(kPiece - 4, 'x') + "__TIMESIZE" + std::string(kPiece, 'y');
  EXPECT_FALSE(digests.Digest(tmp.Write("near.h", near))->has_time_macro);
}

TEST(FileDigestsTest, MemoSurvivesAProcessAndSeesEdits) {
  TempDir tmp;
  std::string file = tmp.Write("h.h", "one\n");
  std::string first;
  {
    FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
    first = digests.Digest(file)->hex;
    digests.Save();
  }
  FileDigests again(tmp / "memo");
  EXPECT_EQ(again.Digest(file)->hex, first);
  tmp.Write("h.h", "two\n");
  EXPECT_NE(again.Digest(file)->hex, first);
  EXPECT_EQ(again.Digest(file)->hex, Xxh128Hex("two\n"));
}

// A tool (cc1plus names __DATE__) is digested as its bytes without the time-macro search, and
// memoized apart: a header's digest of the same file, asked after the tool's was memoized,
// still finds the macro, before and after a save.
TEST(FileDigestsTest, ToolDigestIsTheContentDigestWithoutTheTimeMacroSearch) {
  TempDir tmp;
  std::string text = "built on __DATE__\n";
  std::string file = tmp.Write("cc1plus", text);
  {
    FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
    absl::StatusOr<FileDigest> tool = digests.Digest(file, DigestKind::kTool);
    ASSERT_TRUE(tool.ok()) << tool.status();
    EXPECT_EQ(tool->hex, Xxh128Hex(text));
    EXPECT_FALSE(tool->has_time_macro);
    absl::StatusOr<FileDigest> header = digests.Digest(file);
    EXPECT_EQ(header->hex, tool->hex);
    EXPECT_TRUE(header->has_time_macro);
    digests.Save();
  }
  FileDigests again(tmp / "memo");
  EXPECT_FALSE(again.Digest(file, DigestKind::kTool)->has_time_macro);
  EXPECT_TRUE(again.Digest(file)->has_time_macro);
  std::string big(size_t{64} << 20, 'x');
  big.replace(big.size() / 2, 8, "__TIME__");
  std::string large = tmp.Write("cicc", big);
  EXPECT_FALSE(again.Digest(large, DigestKind::kTool)->has_time_macro);
  EXPECT_TRUE(again.Digest(large)->has_time_macro);
}

// A file of 64 MiB or more (a linked libtorch_cpu.so) is digested as a tree of 16 MiB chunks
// hashed on several threads: the same for the same bytes, changed by a byte in any chunk, a
// time macro found where it straddles two chunks, and never equal to the flat XXH3-128.
TEST(FileDigestsTest, LargeFileIsDigestedAsATreeOfChunks) {
  TempDir tmp;
  constexpr size_t kChunk = size_t{16} << 20;
  std::string bytes(4 * kChunk + 12345, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) >> 7);
  std::string file = tmp.Write("big.so", bytes);
  FileDigests digests("", absl::ZeroDuration());
  absl::StatusOr<FileDigest> first = digests.Digest(file);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->hex.size(), kDigestHexDigits);
  EXPECT_NE(first->hex, Xxh128Hex(bytes));
  EXPECT_FALSE(first->has_time_macro);
  FileDigests fresh("", absl::ZeroDuration());
  EXPECT_EQ(fresh.Digest(file)->hex, first->hex);
  std::string edited = bytes;
  edited[edited.size() - 7] ^= 1;  // in the last, short chunk
  tmp.Write("big.so", edited);
  FileDigests after_edit("", absl::ZeroDuration());
  EXPECT_NE(after_edit.Digest(file)->hex, first->hex);
  std::string dated = bytes;
  dated.replace(2 * kChunk - 4, 8, "__DATE__");  // four bytes in each of chunks 1 and 2
  tmp.Write("big.so", dated);
  FileDigests after_macro("", absl::ZeroDuration());
  EXPECT_TRUE(after_macro.Digest(file)->has_time_macro);
  // Below 64 MiB the digest is the content's XXH3-128.
  std::string smaller = bytes.substr(0, 3 * kChunk);
  tmp.Write("small.so", smaller);
  EXPECT_EQ(after_macro.Digest(tmp / "small.so")->hex, Xxh128Hex(smaller));
}

// Files are stat'ed through their directory's descriptor: a file renamed over, a directory
// replaced by another between passes, a table line damaged, more directories than are kept
// open: each digest is still the content now at the path.
TEST(FileDigestsTest, DigestsFollowTheFileNowAtThePath) {
  TempDir tmp;
  std::string file = tmp.Write("gen/h.h", "one\n");
  FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
  EXPECT_EQ(digests.Digest(file)->hex, Xxh128Hex("one\n"));
  tmp.Write("gen/h.h.new", "two\n");
  fs::rename(tmp / "gen/h.h.new", file);
  EXPECT_EQ(digests.Digest(file)->hex, Xxh128Hex("two\n"));
  digests.BeginPass();
  fs::rename(tmp / "gen", tmp / "old-gen");
  tmp.Write("gen/h.h", "three\n");
  EXPECT_EQ(digests.Digest(file)->hex, Xxh128Hex("three\n"));
  std::vector<std::string> many;
  for (size_t i = 0; i < FileDigests::kMaxDirectories + 8; ++i) {
    many.push_back(tmp.Write(absl::StrCat("d", i, "/x.h"), absl::StrCat(i, "\n")));
  }
  for (size_t i = 0; i < many.size(); ++i) {
    EXPECT_EQ(digests.Digest(many[i])->hex, Xxh128Hex(absl::StrCat(i, "\n"))) << many[i];
  }
  EXPECT_FALSE(digests.Digest(tmp / "gen/absent.h").ok());
  digests.Save();
  // A damaged line is skipped; the others still serve.
  std::string table = ReadAll(tmp / "memo");
  size_t first_line = table.find('\n') + 1;
  std::string sha(64, 'a');
  table.insert(first_line, absl::StrCat("not a line\n0123\t1\tx y\t/p\n", sha,
                                        "\t0\t1 2 3 4 5x\t/p\n", sha, "\t0\t1 2 3 4\t/p\n", sha,
                                        "\t0\t1 2 3 4 5\t\n", sha, "\t0\t-1 2 3 4 5\t/p\n"));
  table += absl::StrCat(sha, "\t0\t1 2 3");  // a table cut short in its last line
  tmp.Write("memo", table);
  FileDigests again(tmp / "memo");
  EXPECT_EQ(again.Digest(file)->hex, Xxh128Hex("three\n"));
  EXPECT_EQ(again.Digest(many.back())->hex, Xxh128Hex(absl::StrCat(many.size() - 1, "\n")));
}

// ccache's "file too new": a file that changed less than `settle` before it was read could
// change again within the file system's timestamp granularity and keep its stat.
TEST(FileDigestsTest, FileChangedWithinTheSettleTimeIsNotMemoized) {
  TempDir tmp;
  std::string file = tmp.Write("fresh.h", "one\n");
  {
    FileDigests digests(tmp / "memo", /*settle=*/absl::Hours(1));
    ASSERT_TRUE(digests.Digest(file).ok());
    digests.Save();
  }
  EXPECT_FALSE(absl::StrContains(ReadAll(tmp / "memo"), file));
  {
    FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
    ASSERT_TRUE(digests.Digest(file).ok());
    digests.Save();
  }
  EXPECT_TRUE(absl::StrContains(ReadAll(tmp / "memo"), file));
}

// FirstMismatch checks a manifest-sized list on several threads and answers the first file,
// in the list's order, whose digest differs or that is gone, whatever thread saw it; what it
// read (files the memo did not know) is memoized after.
TEST(FileDigestsTest, FirstMismatchFindsTheFirstDifferenceInOrder) {
  TempDir tmp;
  constexpr size_t kFiles = FileDigests::kParallelFrom * 3;
  std::vector<std::string> digests_of;
  std::vector<FileDigests::Expected> files;
  for (size_t i = 0; i < kFiles; ++i) {
    std::string text = absl::StrCat("int h", i, ";\n");
    digests_of.push_back(Xxh128Hex(text));
    files.push_back({tmp.Write(absl::StrCat("d", i % 7, "/h", i, ".h"), text), ""});
  }
  for (size_t i = 0; i < kFiles; ++i) files[i].digest = digests_of[i];
  {
    FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
    EXPECT_EQ(digests.FirstMismatch(files), kFiles);  // every file read and hashed
    digests.Save();
  }
  std::vector<std::string> lines = absl::StrSplit(ReadAll(tmp / "memo"), '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), kFiles + 1);
  FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
  EXPECT_EQ(digests.FirstMismatch(files), kFiles);  // from the memo
  tmp.Write(absl::StrCat("d", 450 % 7, "/h450.h"), "int changed;\n");
  EXPECT_EQ(digests.FirstMismatch(files), 450u);
  tmp.Write(absl::StrCat("d", 700 % 7, "/h700.h"), "int changed;\n");
  tmp.Write(absl::StrCat("d", 130 % 7, "/h130.h"), "int changed;\n");
  EXPECT_EQ(digests.FirstMismatch(files), 130u);
  fs::remove(files[20].path);
  EXPECT_EQ(digests.FirstMismatch(files), 20u);
  std::string wrong = digests_of[1];
  files[0].digest = wrong;
  EXPECT_EQ(digests.FirstMismatch(files), 0u);
  EXPECT_EQ(digests.FirstMismatch({}), 0u);
}

// A memo table is loaded as views of its lines: a line that is damaged (a digest of the wrong
// length, a number that does not parse, no path) is not believed, and the next save leaves it
// out while keeping the good lines it did not look up.
TEST(FileDigestsTest, DamagedMemoLinesAreNotBelievedAndNotSavedAgain) {
  TempDir tmp;
  std::string one = tmp.Write("one.h", "int one;\n");
  std::string two = tmp.Write("two.h", "int two;\n");
  {
    FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
    ASSERT_TRUE(digests.Digest(one).ok());
    ASSERT_TRUE(digests.Digest(two).ok());
    digests.Save();
  }
  std::string table = ReadAll(tmp / "memo");
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  std::string two_line = lines[1].find("two.h") != std::string::npos ? lines[1] : lines[2];
  std::string bad_number = absl::StrReplaceAll(two_line, {{"\t", "\tx"}});
  // Another file's line with its digest replaced: believed only if damage went unseen.
  std::string forged = absl::StrCat(std::string(kDigestHexDigits, 'f'), "\t0\t1 2 3 x 5\t", one);
  table = absl::StrCat(lines[0], "\n", two_line, "\n", std::string(kDigestHexDigits - 1, 'a'),
                       "\t0\t1 2 3 4 5\t", tmp / "short.h", "\n", forged, "\n", bad_number, "\n",
                       "no tabs here\n");
  { std::ofstream(tmp / "memo") << table; }
  FileDigests digests(tmp / "memo", /*settle=*/absl::ZeroDuration());
  EXPECT_EQ(digests.Digest(one)->hex, Xxh128Hex("int one;\n"));
  EXPECT_EQ(digests.Digest(two)->hex, Xxh128Hex("int two;\n"));
  digests.Save();
  std::string saved = ReadAll(tmp / "memo");
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(saved, '\n', absl::SkipEmpty())).size(), 3u)
      << saved;
  EXPECT_FALSE(absl::StrContains(saved, std::string(kDigestHexDigits - 1, 'a'))) << saved;
  EXPECT_FALSE(absl::StrContains(saved, std::string(kDigestHexDigits, 'f'))) << saved;
  EXPECT_FALSE(absl::StrContains(saved, "no tabs")) << saved;
}

}  // namespace
}  // namespace kcache::objects
