#include "daemon/host/object_turns.h"

#include <utility>

namespace kcache {
namespace {

// The objects.turn_* statistic that counts `what`.
Statistic StatisticOf(objects::TurnCount what) {
  using Turn = objects::TurnCount;
  switch (what) {
    case Turn::kHeld:
      return Statistic::kObjectTurnsHeld;
    case Turn::kWaits:
      return Statistic::kObjectTurnWaits;
    case Turn::kServed:
      return Statistic::kObjectTurnWaitsServed;
    case Turn::kNotServed:
      return Statistic::kObjectTurnWaitsNotServed;
    case Turn::kReleased:
      return Statistic::kObjectTurnWaitsReleased;
    case Turn::kGaveUp:
      return Statistic::kObjectTurnWaitsGaveUp;
    case Turn::kRefused:
      return Statistic::kObjectTurnCallsRefused;
    case Turn::kCalls:
      break;
  }
  return Statistic::kObjectTurnCalls;
}

}  // namespace

std::unique_ptr<objects::CompileTurns> NewObjectTurns(const objects::CompileTurnOptions& options,
                                                      objects::ObjectCache* stores,
                                                      objects::MemoObjectCache* memo,
                                                      objects::FleetCompileLeases* leases,
                                                      Statistics* counts) {
  auto count = [counts](objects::TurnCount what, int64_t n) { counts->Move(StatisticOf(what), n); };
  auto forget = [memo](const CommandKey& key1) {
    if (memo != nullptr) memo->ForgetListing(key1);
  };
  return std::make_unique<objects::CompileTurns>(options, stores, leases, std::move(count),
                                                 std::move(forget));
}

}  // namespace kcache
