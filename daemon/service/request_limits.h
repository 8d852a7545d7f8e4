// What the daemon accepts from a client. Everything here answers InvalidArgument with a
// message that says what was wrong and what to send instead; nothing a client sends may
// crash the daemon (docs/protocol.md, "Limits").
#ifndef KCACHE_DAEMON_SERVICE_REQUEST_LIMITS_H_
#define KCACHE_DAEMON_SERVICE_REQUEST_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "core/kernel_spec.h"
#include "core/protocol.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache {

// The kernel-spec limits are core's (core/kernel_spec.h: kMaxSpecBytes and the rest).
inline constexpr size_t kMaxWarmTargets = 64;
inline constexpr size_t kMaxClientBytes = 256;  // ResolveRequest.client (logs only)
// Entries of one ResolveMany that wait for a compile at once: the others queue behind them,
// so that a batch holds no more of the daemon's threads than a few single calls do.
inline constexpr size_t kResolveManyCompilesPerCall = 4;
// Resolve payload chunk size: ResolveResponse.chunk carries at most this many bytes.
inline constexpr size_t kChunkBytes = 1u << 20;

// A spec as it arrives: ValidateSpecLimits (core/kernel_spec.h), header names unique, options
// on the allowlist (core/compile_options.h), min_arch/max_arch as ValidateArchRange
// (core/target.h) says. `field`
// names the spec in messages ("spec", "kernels[3]").
absl::Status ValidateSpec(const v1::KernelSpec& spec, absl::string_view field);

// A device: ValidateDeviceSm (core/target.h; a missing device reads as 0.0 and is refused).
absl::Status ValidateDevice(const v1::Device& device, bool present);

// Exactly one kernel (spec, 32-byte kernel_id or non-empty kernel_name) and a valid device.
absl::Status ValidateResolveRequest(const v1::ResolveRequest& request);

// At least one entry and at most kMaxResolveManyEntries (each entry is validated on its own,
// with ValidateResolveRequest, and answered on its own).
absl::Status ValidateResolveManyRequest(const v1::ResolveManyRequest& request);

// At least one kernel and one target, each kernel a valid spec, at most kMaxWarmTargets.
absl::Status ValidateWarmRequest(const v1::WarmRequest& request);

// PTX of at most kMaxBuildPtxBytes (core/protocol.h), non-empty; a valid device; a client
// name of at most kMaxClientBytes, printable ASCII (it is stored with the SASS built).
absl::Status ValidateBuildFromPtxRequest(const v1::BuildFromPtxRequest& request);

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_REQUEST_LIMITS_H_
