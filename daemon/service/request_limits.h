// What the daemon accepts from a client. Everything here answers InvalidArgument with a
// message that says what was wrong and what to send instead; nothing a client sends may
// crash the daemon (docs/protocol.md, "Limits").
#ifndef KCACHE_DAEMON_SERVICE_REQUEST_LIMITS_H_
#define KCACHE_DAEMON_SERVICE_REQUEST_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache {

// gRPC refuses any message over 4 MiB (RESOURCE_EXHAUSTED) before the daemon sees it; these
// limits sit below that so that a large but well-formed spec gets a precise answer.
inline constexpr size_t kMaxSpecBytes = 3u << 20;  // source + headers + options + exprs
inline constexpr size_t kMaxSpecHeaders = 1024;
inline constexpr size_t kMaxSpecOptions = 256;
inline constexpr size_t kMaxNameExpressions = 4096;
inline constexpr size_t kMaxShortField = 4096;  // one option, expression, header name
inline constexpr size_t kMaxKernelNameBytes = 256;
inline constexpr size_t kMaxSourceNameBytes = 255;  // KernelSpec.source_name
inline constexpr size_t kMaxWarmTargets = 64;
inline constexpr size_t kMaxClientBytes = 256;  // ResolveRequest.client (logs only)
// Resolve payload chunk size: ResolveResponse.chunk carries at most this many bytes.
inline constexpr size_t kChunkBytes = 1u << 20;

// A spec as it arrives: non-empty source; sizes within the limits above; no NUL byte in any
// text (NVRTC reads C strings); header names non-empty and unique; options on the allowlist
// (core/compile_options.h); min_arch/max_arch as ValidateArchRange (core/target.h) says. `field`
// names the spec in messages ("spec", "kernels[3]").
absl::Status ValidateSpec(const v1::KernelSpec& spec, absl::string_view field);

// A device: ValidateDeviceSm (core/target.h; a missing device reads as 0.0 and is refused).
absl::Status ValidateDevice(const v1::Device& device, bool present);

// Exactly one kernel (spec, 32-byte kernel_id or non-empty kernel_name) and a valid device.
absl::Status ValidateResolveRequest(const v1::ResolveRequest& request);

// At least one kernel and one target, each kernel a valid spec, at most kMaxWarmTargets.
absl::Status ValidateWarmRequest(const v1::WarmRequest& request);

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_REQUEST_LIMITS_H_
