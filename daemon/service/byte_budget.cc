// A bound on bytes held for many clients at once.
#include "daemon/service/byte_budget.h"

namespace kcache {

bool ByteBudget::TryTake(uint64_t bytes) {
  uint64_t held = held_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || held > limit_ - bytes) return false;
  } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  stats_->Move(gauge_, static_cast<int64_t>(bytes));
  return true;
}

void ByteBudget::Take(uint64_t bytes) {
  held_.fetch_add(bytes, std::memory_order_relaxed);
  stats_->Move(gauge_, static_cast<int64_t>(bytes));
}

void ByteBudget::Give(uint64_t bytes) {
  held_.fetch_sub(bytes, std::memory_order_relaxed);
  stats_->Move(gauge_, -static_cast<int64_t>(bytes));
}

void ByteBudget::Recharge(uint64_t* charged, uint64_t now) {
  if (now > *charged) {
    Take(now - *charged);
  } else if (now < *charged) {
    Give(*charged - now);
  }
  *charged = now;
}

}  // namespace kcache
