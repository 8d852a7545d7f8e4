// The launchers' turns (daemon/objects/compile_turns.h) against hostile or broken parts: a
// client that holds a turn and never compiles, a compromised pod that plants a fleet lease that
// never expires, a flood of turn calls, a kcached that hangs while a launcher waits. None of
// them delays a launcher's compile past its bound: --object-wait-seconds, the calls bound, or
// KCACHE_TIMEOUT_MS of silence. Real kcacheds, a real Redis Cluster, real c++ behind the gated
// compiler (tests/testutil/gated_compiler.h). Skips without c++, redis-cli (redis-server).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "kcache/v1/objects.grpc.pb.h"
#include "tests/testutil/gated_compiler.h"

namespace kcache {
namespace {

using testing::DaemonProcess;
using testing::RunResult;

// Far above the bounds set here, far below the default --object-wait-seconds (180 s).
constexpr auto kWellUnderTheDefaultWait = std::chrono::seconds(60);

// A raw AwaitCompile call, as a hostile client makes it.
struct RawTurn {
  std::unique_ptr<v1::ObjectCache::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AwaitCompileRequest, v1::AwaitCompileUpdate>> stream;
  v1::AwaitCompileUpdate first;  // kcached's first answer
};

std::unique_ptr<RawTurn> OpenTurn(const std::string& address, const std::string& key1,
                                  const std::string& client) {
  auto turn = std::make_unique<RawTurn>();
  turn->stub =
      v1::ObjectCache::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  turn->stream = turn->stub->AwaitCompile(&turn->context);
  v1::AwaitCompileRequest request;
  request.set_key1(key1);
  request.set_client(client);
  EXPECT_TRUE(turn->stream->Write(request));
  EXPECT_TRUE(turn->stream->Read(&turn->first));
  return turn;
}

std::string RandomKey1() {
  std::mt19937_64 random(std::random_device{}());
  std::string key1(32, '\0');
  for (char& c : key1) c = static_cast<char>(random());
  return key1;
}

class HostileCompileTurnsTest : public testing::GatedLaunchTest {
 protected:
  void TearDown() override {
    for (auto& daemon : daemons_) daemon->Kill(SIGCONT);
  }

  // The command's key1: compiled once through a kcached of its own, whose listing names it.
  std::string Key1OfTheCommand() {
    DaemonProcess& other = StartDaemon({});
    gate_->Open();
    RunResult made = Launch(other, "b0", Compile()).get();
    EXPECT_EQ(made.exit_code, 0) << made.output;
    auto stub = v1::ObjectCache::NewStub(
        grpc::CreateChannel(other.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::ListObjectsRequest request;
    request.set_all(true);
    v1::ListObjectsResponse response;
    EXPECT_TRUE(stub->ListObjects(&context, request, &response).ok());
    EXPECT_EQ(response.entries_size(), 1);
    return response.entries_size() == 1 ? response.entries(0).key1() : "";
  }
};

bool Says(const RunResult& result, const std::string& text) {
  return testing::Contains(result.output, text);
}

// A client holds the command's turn and never compiles: the launcher waits --object-wait-seconds
// and compiles. What the client calls itself is shown only made printable.
TEST_F(HostileCompileTurnsTest, ATurnHeldForeverDelaysALauncherAtMostTheWait) {
  std::string key1 = Key1OfTheCommand();
  ASSERT_EQ(key1.size(), 32u);
  DaemonProcess& pod = StartDaemon({"--object-wait-seconds", "2"});
  std::unique_ptr<RawTurn> hog = OpenTurn(pod.address(), key1, "hog\x1b[2J\n");
  ASSERT_EQ(hog->first.kind(), v1::AwaitCompileUpdate::KIND_COMPILE);
  ASSERT_TRUE(hog->first.holds_turn());
  auto start = std::chrono::steady_clock::now();
  RunResult launcher = Launch(pod, "b1", Compile()).get();
  ASSERT_EQ(launcher.exit_code, 0) << launcher.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, kWellUnderTheDefaultWait);
  EXPECT_TRUE(Says(launcher, "waiting for the compile of hog?[2J?")) << launcher.output;
  EXPECT_TRUE(Says(launcher, "waited --object-wait-seconds=2 s for hog")) << launcher.output;
  EXPECT_TRUE(Says(launcher, "kcache: stored")) << launcher.output;
  EXPECT_EQ(Counter(pod, "objects.turn_waits_gave_up"), 1);
  hog->context.TryCancel();
}

// A compromised pod plants the command's fleet lease with no expiry: every opted-in pod's
// launcher waits at most --object-wait-seconds for it, then compiles.
TEST_F(HostileCompileTurnsTest, AFleetLeasePlantedForeverDelaysALauncherAtMostTheWait) {
  StartCluster();
  if (IsSkipped() || HasFatalFailure()) return;
  std::string key1 = Key1OfTheCommand();
  ASSERT_EQ(key1.size(), 32u);
  std::string lease = absl::StrCat("kcache:obj:v1:{", absl::BytesToHexString(key1), "}:turn");
  ASSERT_EQ(testing::Run(absl::StrCat("redis-cli -c -p ", cluster_.ports()[0], " SET '", lease,
                                      "' evil-pod/1/2"))
                .exit_code,
            0);
  DaemonProcess& pod = StartOnCluster(true, {"--object-wait-seconds", "2"});
  auto start = std::chrono::steady_clock::now();
  RunResult launcher = Launch(pod, "b1", Compile()).get();
  ASSERT_EQ(launcher.exit_code, 0) << launcher.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, kWellUnderTheDefaultWait);
  EXPECT_TRUE(Says(launcher, "waiting for the compile of the kcached on evil-pod (pid 1)"))
      << launcher.output;
  EXPECT_TRUE(Says(launcher, "waited --object-wait-seconds=2 s")) << launcher.output;
  EXPECT_EQ(Counter(pod, "objects.turn_waits_gave_up"), 1);
}

// More turn calls than --object-max-turn-calls: the next is told to compile at once, a
// launcher's among them; the calls held are a gauge that comes back down.
TEST_F(HostileCompileTurnsTest, TurnCallsPastTheBoundAreToldToCompileAtOnce) {
  DaemonProcess& pod = StartDaemon({"--object-max-turn-calls", "2"});
  std::vector<std::unique_ptr<RawTurn>> hogs;
  for (int i = 0; i < 2; ++i) {
    hogs.push_back(OpenTurn(pod.address(), RandomKey1(), "hog"));
    ASSERT_TRUE(hogs.back()->first.holds_turn());
  }
  EXPECT_EQ(Counter(pod, "objects.turn_calls"), 2);
  std::unique_ptr<RawTurn> one_more = OpenTurn(pod.address(), RandomKey1(), "hog");
  EXPECT_EQ(one_more->first.kind(), v1::AwaitCompileUpdate::KIND_COMPILE);
  EXPECT_FALSE(one_more->first.holds_turn());
  EXPECT_TRUE(testing::Contains(one_more->first.why(), "--object-max-turn-calls=2"))
      << one_more->first.why();
  gate_->Open();
  RunResult launcher = Launch(pod, "b1", Compile()).get();
  ASSERT_EQ(launcher.exit_code, 0) << launcher.output;
  EXPECT_FALSE(Says(launcher, "waiting for")) << launcher.output;
  EXPECT_TRUE(Says(launcher, "kcache: stored")) << launcher.output;
  EXPECT_EQ(Counter(pod, "objects.turn_calls_refused"), 2);
  for (auto& hog : hogs) hog->context.TryCancel();
  EXPECT_EQ(WaitCounter(pod, "objects.turn_calls", 0), 0);
}

// kcached stops (SIGSTOP) while a launcher waits for another's compile: the launcher hears
// nothing for its silence bound (KCACHE_TIMEOUT_MS, at least a second), marks kcached
// unresponsive and compiles, far sooner than the wait's bound.
TEST_F(HostileCompileTurnsTest, AKcachedThatHangsWhileALauncherWaitsCostsItOnlyTheSilence) {
  DaemonProcess& pod = StartDaemon({});
  std::future<RunResult> holder = Launch(pod, "b1", Compile());
  ASSERT_TRUE(gate_->WaitStopped(1));
  std::future<RunResult> waiter = Launch(pod, "b2", Compile(), "KCACHE_TIMEOUT_MS=500");
  ASSERT_EQ(WaitCounter(pod, "objects.turn_waits", 1), 1);
  ASSERT_TRUE(pod.Pause());
  auto stopped = std::chrono::steady_clock::now();
  gate_->Open();
  RunResult waited = waiter.get();
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, kWellUnderTheDefaultWait);
  ASSERT_EQ(waited.exit_code, 0) << waited.output;
  EXPECT_TRUE(Says(waited, "kcached went silent for 1.0 s")) << waited.output;
  EXPECT_TRUE(Says(waited, "kcached unresponsive")) << waited.output;
  EXPECT_FALSE(testing::ReadAll(tmp_ / "b2/answer.o").empty());
  pod.Kill(SIGCONT);
  EXPECT_EQ(holder.get().exit_code, 0);
}

}  // namespace
}  // namespace kcache
