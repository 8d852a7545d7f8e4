// Answer: what a resolve gives a device, in every layer. The decision returns it
// (engine/resolve/decide.h), the daemon's memory tier holds it (daemon/cache/memory_lru.h), and
// the daemon serves it with the tier it came from (Served, daemon/cache/cache_types.h); the
// in-process runner adds whether its compiled output was written (engine/resolve/in_process.h).
#ifndef KCACHE_CORE_ANSWER_H_
#define KCACHE_CORE_ANSWER_H_

#include <memory>
#include <string>

#include "core/artifact.h"
#include "core/compat.h"

namespace kcache {

struct Answer {
  // Immutable and shared: the memory tier, every answer served from it and the chunks a
  // stream sends point at the same bytes.
  std::shared_ptr<const Artifact> artifact;
  ServeRule rule = ServeRule::kExactSass;
  // One line: why this artifact, e.g. "no sm_89 cubin stored; sm_86 cubin runs on 8.9 (same
  // major, lower minor)". With an unknown driver it ends saying what was assumed.
  std::string reason;
  bool needs_jit() const { return rule == ServeRule::kPtxJit; }
};

}  // namespace kcache

#endif  // KCACHE_CORE_ANSWER_H_
