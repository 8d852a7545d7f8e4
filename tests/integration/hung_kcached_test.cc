// The compiler launchers against a kcached that hangs (a real kcached on a temp socket,
// SIGSTOP'ed): a command waits for it at most its KCACHE_TIMEOUT_MS, lookups and put together,
// then compiles; the commands after it honour the kcached-unresponsive mark and do not ask;
// once kcached answers again the mark goes and hits resume. A hung kcached used to cost each
// command ~26 s. The bounds asserted below are far above the budgets set and far below that:
// they fail when a command waits for the daemon, not when the machine is slow.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::LauncherEnv;
using testing::Outcome;
using testing::OutcomeOf;
using testing::ReadAll;

// Far above any budget a test sets here, far below what a command waiting for a stopped
// kcached took (~26 s).
constexpr auto kWellUnderAHang = std::chrono::seconds(8);
// A budget a command would wait out, were it to ask the stopped kcached: past kWellUnderAHang.
constexpr char kWaitsForever[] = "KCACHE_TIMEOUT_MS=120000";

constexpr char kSource[] = "int answer() { return 42; }\n";

class HungKcachedTest : public testing::LauncherTest {
 protected:
  void SetUp() override {
    src_ = tmp_.Write("src/answer.cpp", kSource);
    daemon_.options().extra_flags = {"--no-toolkit"};
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    env_.store.clear();
    env_.server = daemon_.address();
  }
  // A stopped kcached does not take SIGTERM: let it go on before it is stopped for good.
  void TearDown() override { daemon_.Kill(SIGCONT); }

  // `launcher` ($KCACHE or $KCACHE_LAUNCH) compiling the source with `compiler`.
  std::string Compile(const std::string& launcher, const std::string& compiler = "c++") const {
    return absl::StrCat(launcher, " ", compiler, " -MD -MF answer.o.d -O2 -c ", src_,
                        " -o answer.o");
  }

  // Runs `command` in tmp_/build with `extra` assignments; *took is how long it ran.
  Outcome Timed(const std::string& build, const std::string& command, const std::string& extra,
                std::chrono::milliseconds* took) {
    LauncherEnv env = env_;
    env.extra = extra;
    fs::create_directories(tmp_ / build);
    auto start = std::chrono::steady_clock::now();
    testing::RunResult result = testing::RunIn(tmp_ / build, env, command);
    *took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    last_output_ = result.output;
    return OutcomeOf(result.output);
  }

  std::string Mark() const { return tmp_ / "state/kcached-unresponsive"; }
  bool Says(const std::string& text) const { return testing::Contains(last_output_, text); }

  testing::DaemonProcess daemon_;
  std::string src_;
};

// kcache-launch: a stopped kcached costs the first command its budget, then the mark spares
// the next ones (which would wait 120 s were they to ask), through kcache-launch and kcache
// alike; a kcached that answers again takes the mark away and serves hits.
TEST_F(HungKcachedTest, StoppedKcachedCostsOneBudgetAndTheMarkSparesTheCommandsAfter) {
  std::chrono::milliseconds took{};
  ASSERT_EQ(Build("b0", Compile("$KCACHE_LAUNCH")), Outcome::kMiss) << last_output_;
  ASSERT_TRUE(daemon_.Pause());

  Timed("b1", Compile("$KCACHE_LAUNCH"), "KCACHE_TIMEOUT_MS=300", &took);
  EXPECT_LT(took, kWellUnderAHang) << last_output_;
  EXPECT_TRUE(Says("kcached did not answer within KCACHE_TIMEOUT_MS=300")) << last_output_;
  EXPECT_TRUE(Says("compiling uncached")) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b0/answer.o", tmp_ / "b1/answer.o"));
  EXPECT_TRUE(fs::exists(Mark()));

  for (auto [build, launcher] : {std::pair{"b2l", "$KCACHE_LAUNCH"}, {"b2k", "$KCACHE"}}) {
    Timed(build, Compile(launcher), kWaitsForever, &took);
    EXPECT_LT(took, kWellUnderAHang) << launcher << ": " << last_output_;
    EXPECT_TRUE(Says("kcached unresponsive (mark until ")) << last_output_;
    EXPECT_TRUE(Says("compiling uncached")) << last_output_;
    EXPECT_FALSE(Says("did not answer")) << last_output_;
    EXPECT_TRUE(testing::SameFile(tmp_ / "b0/answer.o", tmp_ / build + "/answer.o"));
  }

  daemon_.Kill(SIGCONT);
  // The mark ends further away than KCACHE_UNRESPONSIVE_MS=0 allows: it is stale, and the next
  // command asks again.
  EXPECT_EQ(Timed("b3", Compile("$KCACHE_LAUNCH"), "KCACHE_UNRESPONSIVE_MS=0", &took),
            Outcome::kHit)
      << last_output_;
  EXPECT_TRUE(Says("kcached was marked unresponsive: asking it again")) << last_output_;
  EXPECT_TRUE(Says("kcached answers again: the unresponsive mark is gone")) << last_output_;
  EXPECT_FALSE(fs::exists(Mark()));
  EXPECT_EQ(Build("b4", Compile("$KCACHE_LAUNCH")), Outcome::kHit) << last_output_;
}

// kcache (CMake's launcher, a TCP address, kcache-launch's hand-off): its gRPC lookup is
// bounded by the budget; the compile's object is written and not stored.
TEST_F(HungKcachedTest, KcachesGrpcLookupIsBoundedAndTheObjectNotStored) {
  std::chrono::milliseconds took{};
  ASSERT_TRUE(daemon_.Pause());
  EXPECT_EQ(Timed("b1", Compile("$KCACHE"), "KCACHE_TIMEOUT_MS=300", &took), Outcome::kMiss)
      << last_output_;
  EXPECT_LT(took, kWellUnderAHang) << last_output_;
  EXPECT_TRUE(Says("kcached did not answer within KCACHE_TIMEOUT_MS=300")) << last_output_;
  EXPECT_TRUE(Says("not stored: kcached at")) << last_output_;
  EXPECT_FALSE(ReadAll(tmp_ / "b1/answer.o").empty());
  EXPECT_TRUE(fs::exists(Mark()));
}

// kcached stops while the compile runs (the compiler here stops it while the test has it armed;
// a compile writes nothing but its outputs, or it would not be stored): the lookups were answered
// (a budget they fit in even on a slow machine), the put is not; the command ends within the
// budget, its object written, and the put dropped. Once kcached answers again, the next miss is
// stored and the one after hits.
TEST_F(HungKcachedTest, PutToAKcachedThatStoppedDuringTheCompileIsDroppedWithinTheBudget) {
  std::string armed = tmp_.Write("armed", "");
  std::string stopper = tmp_.Write(
      "bin/stopping-c++",
      absl::StrCat("#!/bin/sh\ncase \" $* \" in *\" -c \"*)\n  if [ -e ", armed,
                   " ]; then kill -STOP ", daemon_.pid(), "; fi;;\nesac\nexec c++ \"$@\"\n"));
  chmod(stopper.c_str(), 0755);
  std::chrono::milliseconds took{};
  EXPECT_EQ(Timed("b1", Compile("$KCACHE_LAUNCH", stopper), "KCACHE_TIMEOUT_MS=1000", &took),
            Outcome::kMiss)
      << last_output_;
  fs::remove(armed);
  EXPECT_LT(took, kWellUnderAHang) << last_output_;
  EXPECT_TRUE(Says("kcached did not answer within KCACHE_TIMEOUT_MS=1000")) << last_output_;
  EXPECT_TRUE(Says("not stored: kcached at")) << last_output_;
  EXPECT_FALSE(ReadAll(tmp_ / "b1/answer.o").empty());

  daemon_.Kill(SIGCONT);
  EXPECT_EQ(Timed("b2", Compile("$KCACHE_LAUNCH", stopper), "KCACHE_UNRESPONSIVE_MS=0", &took),
            Outcome::kMiss)
      << last_output_;
  EXPECT_TRUE(Says("kcached answers again")) << last_output_;
  EXPECT_FALSE(Says("not stored")) << last_output_;
  EXPECT_EQ(Build("b3", Compile("$KCACHE_LAUNCH", stopper)), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b2/answer.o", tmp_ / "b3/answer.o"));
}

// A large object moves for longer than a small budget: its put and its hit get their
// TransferTime besides, and a healthy kcached is not marked. (The object's bytes come from a
// file the assembler includes, which the key does not see: only their size matters here.)
TEST_F(HungKcachedTest, LargeObjectOnAHealthyKcachedIsNotTakenForAHang) {
  std::string bytes(size_t{32} << 20, '\0');
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < bytes.size(); i += 8) {  // xorshift: incompressible
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bytes.replace(i, 8, reinterpret_cast<const char*>(&x), 8);
  }
  std::string data = tmp_.Write("src/large.bin", bytes);
  src_ = tmp_.Write("src/large.c",
                    absl::StrCat("__asm__(\".section .data\\n.incbin \\\"", data,
                                 "\\\"\\n.previous\");\nint large(void) { return 1; }\n"));
  std::chrono::milliseconds took{};
  std::string command = absl::StrReplaceAll(Compile("$KCACHE_LAUNCH"), {{"c++", "cc"}});
  EXPECT_EQ(Timed("b1", command, "KCACHE_TIMEOUT_MS=500", &took), Outcome::kMiss) << last_output_;
  EXPECT_GT(fs::file_size(tmp_ / "b1/answer.o"), bytes.size());
  EXPECT_EQ(Timed("b2", command, "KCACHE_TIMEOUT_MS=500", &took), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  EXPECT_FALSE(Says("did not answer")) << last_output_;
  EXPECT_FALSE(fs::exists(Mark()));
}

// A damaged mark file costs one command's asking: kcached answers, the file goes. Another
// server's mark is left alone and not honoured.
TEST_F(HungKcachedTest, DamagedOrOtherServersMarkIsHarmless) {
  ASSERT_EQ(Build("b0", Compile("$KCACHE_LAUNCH")), Outcome::kMiss) << last_output_;
  tmp_.Write("state/kcached-unresponsive", std::string(64, '\xff'));
  EXPECT_EQ(Build("b1", Compile("$KCACHE_LAUNCH")), Outcome::kHit) << last_output_;
  EXPECT_FALSE(fs::exists(Mark()));
  std::string other = "kcached-unresponsive v1 99999999999999 unix:///elsewhere.sock\n";
  tmp_.Write("state/kcached-unresponsive", other);
  EXPECT_EQ(Build("b2", Compile("$KCACHE")), Outcome::kHit) << last_output_;
  EXPECT_EQ(ReadAll(Mark()), other);
}

}  // namespace
}  // namespace kcache
