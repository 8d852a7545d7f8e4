// Running the decision to the end in the calling thread: `kcache get --store` and libkcache's
// local fallback, which have no daemon around them (engine/resolve/decide.h).
#ifndef KCACHE_ENGINE_RESOLVE_IN_PROCESS_H_
#define KCACHE_ENGINE_RESOLVE_IN_PROCESS_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/compat.h"
#include "core/kernel_spec.h"
#include "engine/compile/compiler.h"
#include "engine/resolve/decide.h"

namespace kcache {

class Store;

// What the in-process runner answers: the answer, and whether its compiled output was written.
struct InProcessAnswer : Answer {
  // OK, or why the compiled output could not be written to the store (the artifact is served
  // all the same).
  absl::Status write_status;
};

// Runs DecideResolve to the end in the calling thread (`kcache get --store`, libkcache's local
// fallback), after checking the device SM (InvalidArgument): serves what it says, runs its compile
// with compilers[decision.toolkit] and writes the output to `write_to` (null: nowhere; a failed
// write is reported in write_status, never fails the answer). kServeAndCompile serves the PTX after
// the compile has run and been written. A compile error is Aborted with the NVRTC log
// (kCompileError); any other compile failure serves the stored PTX when there is one.
absl::StatusOr<InProcessAnswer> ResolveInProcess(StoreTiers& tiers, Store* write_to,
                                                 const KernelId& id, const KernelRecord* sent,
                                                 const Device& device, const ResolvePolicy& policy,
                                                 absl::Span<Compiler* const> compilers);

// ResolveInProcess over one store, writing compiled output back to it (a read-only store
// refuses the write: see write_status).
absl::StatusOr<InProcessAnswer> ResolveFromStore(Store& store, const KernelId& id,
                                                 const Device& device, const ResolvePolicy& policy,
                                                 absl::Span<Compiler* const> compilers);

// ResolveInProcess with no store: only `spec` (its id filled in) and the compilers.
absl::StatusOr<InProcessAnswer> ResolveSpecInProcess(const KernelRecord& spec, const Device& device,
                                                     const ResolvePolicy& policy,
                                                     absl::Span<Compiler* const> compilers);

}  // namespace kcache

#endif  // KCACHE_ENGINE_RESOLVE_IN_PROCESS_H_
