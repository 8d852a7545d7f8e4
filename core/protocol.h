// Facts of the wire protocol that both ends need beyond kcache/v1/kcache.proto: the metadata
// kcached sends beside its messages (docs/protocol.md, "Metadata").
#ifndef KCACHE_CORE_PROTOCOL_H_
#define KCACHE_CORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

namespace kcache {

// The largest in-pod fast-path message either side sends or accepts (docs/protocol.md, "The
// fast path"): a request over it is refused as malformed (the client sends such a one over
// gRPC instead), an answer over it (a huge compile log) is refused as too large for the path.
inline constexpr size_t kMaxFastMessageBytes = 1u << 20;

// The most entries kcached takes in one ResolveMany; a client sends a longer list (or a bigger
// request) in several calls.
inline constexpr size_t kMaxResolveManyEntries = 1024;

// gRPC's default 4 MiB message limit less room for its framing: the largest unary answer
// kcached sends and the largest Warm request a client sends at once.
inline constexpr size_t kMaxUnaryMessageBytes = (4u << 20) - (64u << 10);

// The largest PTX module kcached takes to build SASS from (BuildFromPtxRequest.ptx): one gRPC
// message. A larger module is left to the driver; bake its SASS with `kcache warm --library`.
inline constexpr size_t kMaxBuildPtxBytes = kMaxUnaryMessageBytes - (4u << 10);

// Initial metadata of a Resolve that kcached accepted: sent as soon as the call passed the
// edge checks and the bounds, before the cache answers. A client whose deadline passes after
// it came knows the daemon is alive and working on the call (a compile), not away.
inline constexpr char kAcceptedMetadataKey[] = "kcache-accepted";

// Trailing metadata of a RESOURCE_EXHAUSTED that a bound of the daemon caused (calls in
// flight, bytes queued for slow readers): milliseconds after which the call may be retried.
// A RESOURCE_EXHAUSTED without it (a compile past its limits) must not be retried.
inline constexpr char kRetryAfterMetadataKey[] = "kcache-retry-after-ms";

// How `kcache run` routed a stand-in at its start (client/cli/stand_in_env.h). For the CUDA
// driver's it tells kcached (FastRequest.note_cuda_stand_in, proto/kcache/v1/fast_path.proto),
// which counts run.cuda_stand_in_<preloaded|refused|off>; the numbers are the wire's.
// kNotRouted (nothing to stand in front of here, or no stand-in installed) is not told.
enum class StandInStart : uint32_t {
  kNotRouted = 0,
  kPreloaded = 1,  // preloaded: its start check, if it has one, passed
  kRefused = 2,    // its start check refused the real library: nothing preloaded
  kOff = 3,        // switched off (--no-cuda, KCACHE_CUDA_STANDIN=0, --no-nvrtc)
};
inline constexpr uint32_t kStandInStartCount = 4;

}  // namespace kcache

#endif  // KCACHE_CORE_PROTOCOL_H_
