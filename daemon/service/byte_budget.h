// ByteBudget: bytes held in memory for many clients at once, against one bound: the Redis
// door's connections (--redis-total-max-bytes) and the object service's uploads
// (--object-upload-max-bytes). Each move is mirrored in a gauge statistic, so that what is held
// now is visible in `kcache stat` and /metrics.
#ifndef KCACHE_DAEMON_SERVICE_BYTE_BUDGET_H_
#define KCACHE_DAEMON_SERVICE_BYTE_BUDGET_H_

#include <atomic>
#include <cstdint>

#include "daemon/cache/statistics.h"

namespace kcache {

// Thread-safe (atomics). `stats` is borrowed and must outlive the budget.
class ByteBudget {
 public:
  ByteBudget(uint64_t limit, Statistics* stats, Statistic gauge)
      : limit_(limit), stats_(stats), gauge_(gauge) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Takes `bytes` when they fit beside what is held (held + bytes <= limit); false, taking
  // nothing, otherwise.
  bool TryTake(uint64_t bytes);
  // Takes `bytes` whether or not they fit: for bytes already in memory (a read already done).
  void Take(uint64_t bytes);
  // Gives back `bytes` taken before.
  void Give(uint64_t bytes);
  // Moves a holder's share from `*charged` to `now` (Take or Give the difference).
  void Recharge(uint64_t* charged, uint64_t now);

  uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  // limit - held, 0 when over.
  uint64_t room() const {
    uint64_t h = held();
    return h >= limit_ ? 0 : limit_ - h;
  }

 private:
  const uint64_t limit_;
  Statistics* const stats_;
  const Statistic gauge_;
  std::atomic<uint64_t> held_{0};
};

// Bytes taken from a budget for one holder, given back when it goes.
class BudgetShare {
 public:
  BudgetShare() = default;
  BudgetShare(ByteBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
  BudgetShare(const BudgetShare&) = delete;
  BudgetShare& operator=(const BudgetShare&) = delete;
  ~BudgetShare() {
    if (budget_ != nullptr) budget_->Give(bytes_);
  }

 private:
  ByteBudget* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_BYTE_BUDGET_H_
