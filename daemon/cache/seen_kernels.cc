#include "daemon/cache/seen_kernels.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace kcache {

size_t SeenKernels::KernelIdHash::operator()(const KernelId& id) const {
  size_t h = 0;  // a SHA-256 is already uniform: its first bytes are a good hash
  std::memcpy(&h, id.Bytes().data(), sizeof(h));
  return h;
}

bool SeenKernels::Record(const KernelId& id, Sm sm, const KernelRecord* record) {
  absl::MutexLock lock(&mu_);
  auto found = entries_.find(id);
  if (found == entries_.end()) {
    if (entries_.size() >= max_kernels_) return false;
    SeenEntry fresh;
    fresh.id = id;
    found = entries_.emplace(id, std::move(fresh)).first;
  }
  SeenEntry& entry = found->second;
  ++entry.requests;
  if (record != nullptr && !entry.record) entry.record = *record;
  if (entry.devices.size() < max_devices_ &&
      std::find(entry.devices.begin(), entry.devices.end(), sm) == entry.devices.end()) {
    entry.devices.push_back(sm);
  }
  return true;
}

std::vector<SeenEntry> SeenKernels::Entries() const {
  absl::MutexLock lock(&mu_);
  std::vector<SeenEntry> out;
  out.reserve(entries_.size());
  for (const auto& [id, entry] : entries_) out.push_back(entry);
  return out;
}

size_t SeenKernels::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace kcache
