// TurnOrder: each client's compiles in arrival order, then one turn at a time among the
// clients' first waiting compiles, with the client's state moved on as if it got the worker.
#include "engine/workers/turn_order.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace kcache {
namespace {

struct Client {
  std::vector<size_t> waiting;  // indices into the waiting list, by arrival
  size_t next = 0;              // the first of them not yet given a turn
  ClientTurns turns;
  size_t left() const { return waiting.size() - next; }
};

}  // namespace

std::vector<size_t> TurnOrder(const std::vector<WaitingTurn>& waiting,
                              const std::function<ClientTurns(const std::string&)>& clients,
                              int share, uint64_t starts) {
  absl::flat_hash_map<std::string, Client> by_name;
  for (size_t i = 0; i < waiting.size(); ++i) {
    auto [it, added] = by_name.try_emplace(*waiting[i].client);
    if (added) it->second.turns = clients(it->first);
    it->second.waiting.push_back(i);
  }
  std::vector<Client*> ranked;
  for (auto& [name, client] : by_name) {
    std::sort(client.waiting.begin(), client.waiting.end(),
              [&](size_t a, size_t b) { return waiting[a].arrival < waiting[b].arrival; });
    ranked.push_back(&client);
  }
  auto head = [&](const Client* c) { return waiting[c->waiting[c->next]].arrival; };
  auto before = [&](const Client* a, const Client* b) {
    if (a->turns.running != b->turns.running) return a->turns.running < b->turns.running;
    if (a->turns.last_served != b->turns.last_served) {
      return a->turns.last_served < b->turns.last_served;
    }
    return head(a) < head(b);
  };
  std::vector<size_t> order;
  order.reserve(waiting.size());
  while (order.size() < waiting.size()) {
    size_t left = waiting.size() - order.size();
    Client* next = nullptr;
    Client* earliest = nullptr;
    for (Client* c : ranked) {
      if (c->left() == 0) continue;
      if (earliest == nullptr || head(c) < head(earliest)) earliest = c;
      bool others_wait = left > c->left();
      if (others_wait && c->turns.running >= share) continue;
      if (next == nullptr || before(c, next)) next = c;
    }
    if (next == nullptr) next = earliest;
    order.push_back(next->waiting[next->next++]);
    ++next->turns.running;
    next->turns.last_served = ++starts;
  }
  return order;
}

}  // namespace kcache
