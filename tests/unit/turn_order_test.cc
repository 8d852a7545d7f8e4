// TurnOrder: the order a worker pool's waiting compiles get a worker (docs/compile-workers.md,
// "Queueing"), as the pool's queue tells each waiting compile its place.
#include "engine/workers/turn_order.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace kcache {
namespace {

// The clients of `waiting` in turn order.
std::vector<std::string> Order(const std::vector<std::string>& waiting,
                               const absl::flat_hash_map<std::string, ClientTurns>& clients,
                               int share) {
  std::vector<WaitingTurn> turns;
  for (size_t i = 0; i < waiting.size(); ++i) turns.push_back({&waiting[i], i + 1});
  std::vector<std::string> order;
  for (size_t i : TurnOrder(
           turns,
           [&](const std::string& client) {
             auto found = clients.find(client);
             return found == clients.end() ? ClientTurns{} : found->second;
           },
           share, /*starts=*/10)) {
    order.push_back(waiting[i]);
  }
  return order;
}

TEST(TurnOrderTest, OneClientsCompilesGoInArrivalOrder) {
  std::vector<WaitingTurn> turns;
  std::string a = "a";
  for (uint64_t arrival : {3, 1, 2}) turns.push_back({&a, arrival});
  EXPECT_EQ(TurnOrder(
                turns, [](const std::string&) { return ClientTurns{}; }, 1, 0),
            (std::vector<size_t>{1, 2, 0}));
}

TEST(TurnOrderTest, ClientsTakeTurnsWhateverTheyArrivalOrder) {
  EXPECT_EQ(Order({"a", "a", "a", "b", "b"}, {}, /*share=*/3),
            (std::vector<std::string>{"a", "b", "a", "b", "a"}));
}

TEST(TurnOrderTest, AClientWithFewerCompilesRunningGoesFirst) {
  EXPECT_EQ(Order({"busy", "idle"}, {{"busy", ClientTurns{2, 9}}}, /*share=*/3),
            (std::vector<std::string>{"idle", "busy"}));
}

TEST(TurnOrderTest, AClientServedLongerAgoGoesFirst) {
  EXPECT_EQ(Order({"recent", "earlier"},
                  {{"recent", ClientTurns{0, 9}}, {"earlier", ClientTurns{0, 4}}}, /*share=*/3),
            (std::vector<std::string>{"earlier", "recent"}));
}

TEST(TurnOrderTest, AClientAtItsShareWaitsWhileOthersWaitThenTakesTheRest) {
  EXPECT_EQ(Order({"bomber", "bomber", "small"}, {{"bomber", ClientTurns{1, 1}}}, /*share=*/1),
            (std::vector<std::string>{"small", "bomber", "bomber"}));
}

}  // namespace
}  // namespace kcache
