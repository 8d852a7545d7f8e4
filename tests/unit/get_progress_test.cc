// `kcache get`'s progress lines (client/cli/get_progress.h): what each stage says, and at most
// one line a second per kernel.
#include "client/cli/get_progress.h"

#include <stdio.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace kcache::cli {
namespace {

using client::CompileProgress;
using Stage = CompileProgress::Stage;

CompileProgress At(Stage stage, size_t index = 0) {
  CompileProgress p;
  p.index = index;
  p.stage = stage;
  p.elapsed = absl::Seconds(4);
  return p;
}

TEST(GetProgressTest, QueuedSaysHowManyCompilesAreAhead) {
  CompileProgress p = At(Stage::kQueued);
  p.queued_behind = 2;
  EXPECT_EQ(DescribeProgress("softmax", "8.9", p),
            "softmax for 8.9: queued behind 2 compiles (4.00 s)");
}

TEST(GetProgressTest, CompilingSaysForHowLongAndAboutHowLongWhenKnown) {
  CompileProgress p = At(Stage::kCompiling);
  p.compiling_for = absl::Milliseconds(1500);
  EXPECT_EQ(DescribeProgress("softmax", "8.9", p), "softmax for 8.9: compiling (1.50 s)");
  p.expected = absl::Seconds(6);
  EXPECT_EQ(DescribeProgress("softmax", "8.9", p),
            "softmax for 8.9: compiling (1.50 s of about 6.00 s)");
}

TEST(GetProgressTest, PrintsAtMostOneLineASecondPerKernelAndNothingBeforeItKnowsWhere) {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  ASSERT_NE(out, nullptr);
  GetProgress progress(out, {"a", "b"}, "8.9");
  CompileProgress early = At(Stage::kUnknown);
  early.elapsed = absl::ZeroDuration();
  progress.Print(early);                     // the daemon's first word: not yet where
  progress.Print(At(Stage::kQueued, 0));     // printed
  progress.Print(At(Stage::kQueued, 0));     // within the second: not
  progress.Print(At(Stage::kCompiling, 1));  // another kernel: printed
  progress.Print(At(Stage::kQueued, 5));     // not in the batch: ignored
  fclose(out);
  std::string printed(text, size);
  free(text);
  EXPECT_EQ(printed,
            "kcached: a for 8.9: queued behind 0 compiles (4.00 s)\n"
            "kcached: b for 8.9: compiling (0 us)\n");
}

}  // namespace
}  // namespace kcache::cli
