// SeenKernels: which kernels workers asked for, on which device SMs, how often, so
// `kcache export-manifest` can write them out for the next image build. Bounded in memory.
#ifndef KCACHE_DAEMON_CACHE_SEEN_KERNELS_H_
#define KCACHE_DAEMON_CACHE_SEEN_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache {

struct SeenEntry {
  KernelId id;
  std::optional<KernelRecord> record;  // the spec, once a request or a store supplied it
  std::vector<Sm> devices;             // distinct, in the order first asked for
  uint64_t requests = 0;
};

// Thread-safe. At most `max_kernels` kernels (later new ones are not recorded) and
// `max_devices` devices per kernel are kept.
class SeenKernels {
 public:
  static constexpr size_t kDefaultMaxKernels = 10000;
  static constexpr size_t kDefaultMaxDevices = 64;
  explicit SeenKernels(size_t max_kernels = kDefaultMaxKernels,
                       size_t max_devices = kDefaultMaxDevices)
      : max_kernels_(max_kernels), max_devices_(max_devices) {}

  // Counts a request for `id` on `sm`. `record` (may be null) is copied only when the entry has
  // none yet. False when the table is full and `id` is new: nothing was recorded.
  bool Record(const KernelId& id, Sm sm, const KernelRecord* record);

  // Every entry, in no particular order.
  std::vector<SeenEntry> Entries() const;
  size_t size() const;

 private:
  struct KernelIdHash {
    size_t operator()(const KernelId& id) const;
  };
  const size_t max_kernels_;
  const size_t max_devices_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<KernelId, SeenEntry, KernelIdHash> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_SEEN_KERNELS_H_
