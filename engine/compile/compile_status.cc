// CompileStatus: a read of its atomics as one view.
#include "engine/compile/compile_status.h"

#include <algorithm>

namespace kcache {

CompileStatus::View CompileStatus::Read() const {
  View view;
  view.stage = static_cast<CompileStage>(stage_.load(std::memory_order_relaxed));
  view.queued_behind = queued_behind_.load(std::memory_order_relaxed);
  if (view.stage == CompileStage::kCompiling) {
    int64_t started = started_nanos_.load(std::memory_order_relaxed);
    view.compiling_for = std::max(absl::ZeroDuration(), absl::Now() - absl::FromUnixNanos(started));
  }
  view.expected = absl::Microseconds(expected_micros_.load(std::memory_order_relaxed));
  return view;
}

}  // namespace kcache
