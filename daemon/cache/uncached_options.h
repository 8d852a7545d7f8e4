// Launcher commands run uncached, counted by the option that decided it (a launcher tells its
// reason and, when an option decided, the option's name: "unknown_option", "-fplugin"), so an
// operator sees which options keep a pod's builds from being served (`kcache stat --server`,
// kcache_launcher_uncached_option_total{reason,option}). Names come from clients: each is cut
// to kMaxOptionBytes and made printable, and at most `limit` distinct (reason, option) pairs
// are kept; the rest are counted under the option "(others)".
#ifndef KCACHE_DAEMON_CACHE_UNCACHED_OPTIONS_H_
#define KCACHE_DAEMON_CACHE_UNCACHED_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/compiler_command.h"

namespace kcache {

struct UncachedOptionCount {
  UncachedReason reason = UncachedReason::kNone;
  std::string option;
  uint64_t count = 0;
};

// Thread-safe.
class UncachedOptionCounts {
 public:
  static constexpr size_t kMaxOptionBytes = 64;
  static constexpr size_t kDefaultLimit = 256;
  static constexpr absl::string_view kOthers = "(others)";

  // The most distinct pairs kept (kcached's --max-uncached-options); 0 keeps none (every
  // option counts under kOthers).
  void SetLimit(size_t limit);
  // Counts one command: `option` as a client sent it (an empty one is not counted).
  void Add(UncachedReason reason, absl::string_view option);
  // Every pair, most counted first (ties by reason, then option).
  std::vector<UncachedOptionCount> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  size_t limit_ ABSL_GUARDED_BY(mu_) = kDefaultLimit;
  std::map<std::pair<UncachedReason, std::string>, uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  size_t kept_ ABSL_GUARDED_BY(mu_) = 0;  // pairs other than the kOthers ones
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_UNCACHED_OPTIONS_H_
