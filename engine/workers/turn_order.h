// TurnOrder: the order in which a worker pool's waiting compiles get a worker
// (docs/compile-workers.md, "Queueing"): the first is the one the next free worker goes to;
// the rest is that choice repeated as if none of the running compiles ended meanwhile.
#ifndef KCACHE_ENGINE_WORKERS_TURN_ORDER_H_
#define KCACHE_ENGINE_WORKERS_TURN_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kcache {

// One waiting compile: its client (borrowed: must outlive the call) and when it arrived
// (distinct per compile, larger = later).
struct WaitingTurn {
  const std::string* client = nullptr;
  uint64_t arrival = 0;
};

// A client's place in the queue's ranking.
struct ClientTurns {
  int running = 0;  // its compiles running now
  uint64_t last_served =
      0;  // when it last got a worker, in the pool's count of starts; 0: not lately
};

// Indices into `waiting`, in turn order. Each turn goes, among the clients below their
// `share` of workers (any client when only its compiles wait), to the one with the fewest
// compiles running, then the one served longest ago, then the earliest to arrive; when every
// waiting client is at its share, to the earliest. A client's compiles go in arrival order.
// `clients` gives each client's state now; `starts` is the pool's count of starts so far.
// O(waiting × waiting clients).
std::vector<size_t> TurnOrder(const std::vector<WaitingTurn>& waiting,
                              const std::function<ClientTurns(const std::string&)>& clients,
                              int share, uint64_t starts);

}  // namespace kcache

#endif  // KCACHE_ENGINE_WORKERS_TURN_ORDER_H_
