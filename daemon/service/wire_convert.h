// Conversions between the wire types (kcache.v1, proto/kcache/v1/kcache.proto) and the core
// types. The only place that knows both; validation of what arrives is in request_limits.h.
#ifndef KCACHE_DAEMON_SERVICE_WIRE_CONVERT_H_
#define KCACHE_DAEMON_SERVICE_WIRE_CONVERT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "daemon/cache/cache_types.h"
#include "engine/warm/warm.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache {

// Longest compile log copied into an ArtifactHeader (a header must stay far below gRPC's
// 4 MiB message limit); a longer log is cut with a note.
inline constexpr size_t kMaxHeaderLogBytes = 256u << 10;

// A spec from the wire (already validated) as a kernel record; the id is computed here from
// the content, never taken from the client.
KernelRecord RecordFromProto(const v1::KernelSpec& spec);
void RecordToProto(const KernelRecord& record, v1::KernelSpec* out);

Device DeviceFromProto(const v1::Device& device);
void DeviceToProto(const Device& device, v1::Device* out);

// The edge's one check and conversion of a Resolve request: ValidateResolveRequest
// (request_limits.h: one kernel, sizes, options, arch range, device SM), then QueryFromProto.
// What it returns is what the cache takes without checking again; InvalidArgument names what
// was wrong.
absl::StatusOr<ResolveQuery> CheckedQueryFromProto(const v1::ResolveRequest& request);

// A ResolveRequest that passed ValidateResolveRequest as a cache query (the spec's id computed
// here, once). CheckedQueryFromProto does both.
ResolveQuery QueryFromProto(const v1::ResolveRequest& request);

// Parses WarmRequest.targets ("7.5", "sm_90a", "compute_90"); InvalidArgument naming the bad
// one. Duplicates are refused.
absl::StatusOr<std::vector<Target>> TargetsFromProto(
    const google::protobuf::RepeatedPtrField<std::string>& targets);

v1::ArtifactKind KindToProto(ArtifactKind kind);
v1::ServeRule RuleToProto(ServeRule rule);
v1::Tier TierToProto(CacheTier tier);

// The header that opens a Resolve answer (size and checksum of the payload that follows).
void HeaderFromServed(const Served& served, v1::ArtifactHeader* out);

void JobDoneToProto(const WarmJobResult& result, int done, int total, v1::WarmJobDone* out);
void SummaryToProto(const WarmSummary& summary, v1::WarmSummary* out);

void SnapshotToProto(const CacheSnapshot& snapshot, uint64_t uptime_seconds, v1::StatResponse* out);
// A listed kernel's name is at most this long: a longer one (a Redis-door key stored before
// --redis-key-max-bytes) is cut, ending "... (N bytes)".
inline constexpr size_t kMaxListedNameBytes = 4096;
// A List page holds about this much (at least one kernel).
inline constexpr size_t kListPageBytes = size_t{1} << 20;
std::string ListedName(const std::string& name);
// Every kernel (an unpaged List).
void ListedToProto(const std::vector<ListedKernelInfo>& kernels, v1::ListResponse* out);
// The page of `kernels` after kernel id `after` (bytes; empty: the first), in id order, with
// next_page_after set when more follow.
void ListedPageToProto(std::vector<ListedKernelInfo> kernels, const std::string& after,
                       v1::ListResponse* out);

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_WIRE_CONVERT_H_
