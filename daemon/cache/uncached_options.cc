#include "daemon/cache/uncached_options.h"

#include <algorithm>

namespace kcache {

void UncachedOptionCounts::SetLimit(size_t limit) {
  absl::MutexLock lock(&mu_);
  limit_ = limit;
}

void UncachedOptionCounts::Add(UncachedReason reason, absl::string_view option) {
  if (option.empty()) return;
  std::string name(option.substr(0, kMaxOptionBytes));
  for (char& c : name) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  absl::MutexLock lock(&mu_);
  auto it = counts_.find({reason, name});
  if (it == counts_.end()) {
    if (kept_ >= limit_) {
      ++counts_[{reason, std::string(kOthers)}];
      return;
    }
    ++kept_;
    it = counts_.emplace(std::make_pair(reason, std::move(name)), 0).first;
  }
  ++it->second;
}

std::vector<UncachedOptionCount> UncachedOptionCounts::Snapshot() const {
  std::vector<UncachedOptionCount> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, count] : counts_) out.push_back({key.first, key.second, count});
  }
  std::stable_sort(
      out.begin(), out.end(),
      [](const UncachedOptionCount& a, const UncachedOptionCount& b) { return a.count > b.count; });
  return out;
}

}  // namespace kcache
