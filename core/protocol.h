// Facts of the wire protocol that both ends need beyond kcache/v1/kcache.proto: the metadata
// kcached sends beside its messages (docs/protocol.md, "Metadata").
#ifndef KCACHE_CORE_PROTOCOL_H_
#define KCACHE_CORE_PROTOCOL_H_

namespace kcache {

// Initial metadata of a Resolve that kcached accepted: sent as soon as the call passed the
// edge checks and the bounds, before the cache answers. A client whose deadline passes after
// it came knows the daemon is alive and working on the call (a compile), not away.
inline constexpr char kAcceptedMetadataKey[] = "kcache-accepted";

// Trailing metadata of a RESOURCE_EXHAUSTED that a bound of the daemon caused (calls in
// flight, bytes queued for slow readers): milliseconds after which the call may be retried.
// A RESOURCE_EXHAUSTED without it (a compile past its limits) must not be retried.
inline constexpr char kRetryAfterMetadataKey[] = "kcache-retry-after-ms";

}  // namespace kcache

#endif  // KCACHE_CORE_PROTOCOL_H_
