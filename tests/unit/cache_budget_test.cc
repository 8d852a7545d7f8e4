// A launcher command's time for kcached (client/launch/cache_budget.h) and the
// kcached-unresponsive mark (unresponsive_mark.h): when a call counts as timed out, what the
// mark file says and who honours it, and the budget handed from kcache-launch to kcache.
#include "client/launch/cache_budget.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/launch/unresponsive_mark.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::launch {
namespace {

namespace fs = std::filesystem;
using testing::ReadAll;

constexpr char kServer[] = "unix:///run/kcache/kcache.sock";

class CacheBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("KCACHE_STATE_DIR", tmp_.path().c_str(), 1);
    unsetenv("KCACHE_TIMEOUT_MS");
    unsetenv("KCACHE_TIMEOUT_LEFT");
    unsetenv("KCACHE_UNRESPONSIVE_MS");
  }
  void TearDown() override { unsetenv("KCACHE_STATE_DIR"); }

  UnresponsiveMark Mark(absl::Duration lasts = absl::Seconds(20)) const {
    return UnresponsiveMark(tmp_.path(), kServer, lasts);
  }
  std::string MarkPath() const { return tmp_ / kUnresponsiveMarkFile; }
  // A call the budget gives no time: it ends at once at its budget's end.
  static void TimeOut(CacheBudget& budget) { budget.End(budget.Begin(), /*answered=*/false); }

  testing::TempDir tmp_;
};

TEST_F(CacheBudgetTest, MarkHoldsUntilItsEndForItsServerOnly) {
  absl::Time until = Mark().Set();
  EXPECT_GT(until, absl::Now());
  UnresponsiveMark again = Mark();
  EXPECT_EQ(again.Check(absl::Seconds(2)), absl::FromUnixMillis(absl::ToUnixMillis(until)));
  EXPECT_FALSE(again.probing());
  UnresponsiveMark other(tmp_.path(), "unix:///elsewhere.sock", absl::Seconds(20));
  std::string text = ReadAll(MarkPath());
  EXPECT_EQ(other.Check(absl::Seconds(2)), std::nullopt);
  EXPECT_FALSE(other.probing());
  EXPECT_EQ(ReadAll(MarkPath()), text);  // another server's mark is left alone
}

TEST_F(CacheBudgetTest, ExpiredDamagedOrTooDistantMarkMakesThisCommandProbe) {
  const std::string kStale[] = {
      absl::StrCat("kcached-unresponsive v1 ", absl::ToUnixMillis(absl::Now()) - 1, " ", kServer),
      absl::StrCat("kcached-unresponsive v1 ", absl::ToUnixMillis(absl::Now() + absl::Hours(9)),
                   " ", kServer),
      "kcached-unresponsive v1 soon unix:///run/kcache/kcache.sock",
      std::string(10000, 'x'),
      "",
  };
  for (const std::string& stale : kStale) {
    tmp_.Write(kUnresponsiveMarkFile, stale);
    UnresponsiveMark mark = Mark();
    EXPECT_EQ(mark.Check(absl::Seconds(2)), std::nullopt) << stale;
    EXPECT_TRUE(mark.probing()) << stale;
    // Renewed for the probe's asking: the others compile meanwhile.
    UnresponsiveMark meanwhile = Mark();
    std::optional<absl::Time> until = meanwhile.Check(absl::Seconds(2));
    ASSERT_TRUE(until.has_value()) << stale;
    EXPECT_LE(*until, absl::Now() + absl::Seconds(2));
    mark.Clear();
    EXPECT_FALSE(fs::exists(MarkPath()));
  }
}

TEST_F(CacheBudgetTest, NoMarkWithoutAStateDirectoryOrAServer) {
  UnresponsiveMark nowhere("", kServer, absl::Seconds(20));
  nowhere.Set();
  EXPECT_EQ(nowhere.Check(absl::Seconds(2)), std::nullopt);
  UnresponsiveMark no_server(tmp_.path(), "", absl::Seconds(20));
  no_server.Set();
  EXPECT_FALSE(fs::exists(MarkPath()));
}

TEST_F(CacheBudgetTest, CallThatRunsOutOfTheBudgetMarksKcachedAndSpendsIt) {
  CacheBudget budget(absl::ZeroDuration(), Mark(), /*log=*/false);
  EXPECT_TRUE(budget.spent());
  EXPECT_FALSE(budget.timed_out());
  TimeOut(budget);
  EXPECT_TRUE(budget.timed_out());
  EXPECT_TRUE(budget.spent());
  EXPECT_TRUE(fs::exists(MarkPath()));
  EXPECT_NE(budget.Unresponsive().find("kcached unresponsive (mark until "), std::string::npos)
      << budget.Unresponsive();
  CacheBudget next(absl::Seconds(1), Mark(), false);
  EXPECT_TRUE(next.CompileWithoutAsking());
}

TEST_F(CacheBudgetTest, AnsweredOrRefusedCallsAndNotesNeverMark) {
  CacheBudget budget(absl::Seconds(30), Mark(), false);
  CacheBudget::Call call = budget.Begin();
  EXPECT_GE(call.deadline, call.started + absl::Seconds(30));
  budget.End(call, /*answered=*/false);  // refused at once: no daemon there
  CacheBudget::Call note = budget.Begin(absl::ZeroDuration(), absl::Milliseconds(100));
  EXPECT_LE(note.deadline, note.started + absl::Milliseconds(100));
  EXPECT_EQ(note.budget_end, note.started + budget.left());
  budget.Spend(note);
  budget.End(budget.Begin(), /*answered=*/true);
  EXPECT_FALSE(budget.timed_out());
  EXPECT_FALSE(fs::exists(MarkPath()));
  EXPECT_LT(budget.left(), absl::Seconds(30));
  // A put's bytes get their transfer time besides the budget.
  EXPECT_EQ(TransferTime(uint64_t{256} << 20), absl::Milliseconds(12800));
  CacheBudget::Call put = budget.Begin(TransferTime(uint64_t{64} << 20));
  EXPECT_EQ(put.budget_end - put.started, budget.left() + absl::Milliseconds(3200));
}

TEST_F(CacheBudgetTest, GetOfAListedEntryTakesItsTransferTime) {
  ObjectEntry big, small;
  big.key.entry_id = "entry-big";
  big.size = uint64_t{150} << 20;
  small.key.entry_id = "entry-small";
  small.size = 4096;
  ListedSizes listed;
  listed.Note({big, small});
  EXPECT_EQ(listed.TransferTimeOf(big.key), absl::Milliseconds(7500));
  EXPECT_EQ(listed.TransferTimeOf(small.key), absl::ZeroDuration());
  ObjectEntryKey other;
  other.entry_id = "entry-not-listed";
  EXPECT_EQ(listed.TransferTimeOf(other), absl::ZeroDuration());
}

TEST_F(CacheBudgetTest, ProbeAnsweredTakesTheMarkAway) {
  tmp_.Write(kUnresponsiveMarkFile, "kcached-unresponsive v1 1 unix:///run/kcache/kcache.sock");
  CacheBudget budget(absl::Seconds(1), Mark(), false);
  EXPECT_FALSE(budget.CompileWithoutAsking());
  EXPECT_TRUE(fs::exists(MarkPath()));  // the probe's own, short mark
  EXPECT_TRUE(CacheBudget(absl::Seconds(1), Mark(), false).CompileWithoutAsking());
  budget.End(budget.Begin(), /*answered=*/true);
  EXPECT_FALSE(fs::exists(MarkPath()));
}

// kcache-launch execs kcache in the same process: what is left of the budget, and the probe it
// began, go with the command; the variable is gone for the compiler.
TEST_F(CacheBudgetTest, HandedOnBudgetKeepsWhatIsLeftAndTheProbe) {
  setenv("KCACHE_TIMEOUT_MS", "5000", 1);
  tmp_.Write(kUnresponsiveMarkFile, "kcached-unresponsive v1 1 unix:///run/kcache/kcache.sock");
  std::shared_ptr<CacheBudget> launch = CacheBudget::FromEnvironment(kServer, false);
  EXPECT_EQ(launch->left(), absl::Seconds(5));
  EXPECT_FALSE(launch->CompileWithoutAsking());  // probes
  CacheBudget::Call call = launch->Begin();
  usleep(20000);
  launch->Spend(call);
  launch->HandOn();

  std::shared_ptr<CacheBudget> kcache = CacheBudget::FromEnvironment(kServer, false);
  EXPECT_EQ(std::getenv("KCACHE_TIMEOUT_LEFT"), nullptr);
  EXPECT_LE(kcache->left(), absl::Milliseconds(4980));
  EXPECT_GE(kcache->left(), absl::Milliseconds(4000));
  // It does not honour the probe's mark as another command would: it carries the probe on.
  EXPECT_FALSE(kcache->CompileWithoutAsking());
  kcache->End(kcache->Begin(), /*answered=*/true);
  EXPECT_FALSE(fs::exists(MarkPath()));
}

TEST_F(CacheBudgetTest, BudgetLeftForAnotherProcessOrMalformedIsIgnored) {
  setenv("KCACHE_TIMEOUT_MS", "700", 1);
  for (std::string left : {absl::StrCat("3:", getpid() + 1, ":"), std::string("3"),
                           std::string("x:y:z"), absl::StrCat("-5:", getpid())}) {
    setenv("KCACHE_TIMEOUT_LEFT", left.c_str(), 1);
    std::shared_ptr<CacheBudget> budget = CacheBudget::FromEnvironment(kServer, false);
    EXPECT_EQ(budget->left(), absl::Milliseconds(700)) << left;
    EXPECT_EQ(std::getenv("KCACHE_TIMEOUT_LEFT"), nullptr) << left;
  }
  for (const char* timeout : {"0", "-3", "soon", ""}) {
    setenv("KCACHE_TIMEOUT_MS", timeout, 1);
    EXPECT_EQ(CacheBudget::FromEnvironment(kServer, false)->left(), kDefaultCacheTimeout)
        << timeout;
  }
}

}  // namespace
}  // namespace kcache::launch
