// Fuzzes what kcached accepts from a client before anything else sees it: request validation
// (daemon/service/request_limits.h, with core's ValidateSpecLimits and the option allowlist)
// and the conversion to core types (daemon/service/wire_convert.h). The first byte picks the
// message (even: ResolveRequest, odd: WarmRequest); the rest is its wire encoding.
// Checked: refusals are InvalidArgument; what validation accepts is within core's limits and
// converts, and a spec survives RecordFromProto/RecordToProto with the same kernel id; parsed
// targets print back to themselves.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/compile_options.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/wire_convert.h"
#include "kcache/v1/kcache.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace kcache {
namespace {

void CheckRefusal(const absl::Status& status) {
  FUZZ_CHECK(status.ok() || status.code() == absl::StatusCode::kInvalidArgument, status.ToString());
  FUZZ_CHECK(status.ok() || !status.message().empty(), "a refusal without a message");
}

// A spec as validation sees it, whether or not the request around it is valid.
void CheckSpec(const v1::KernelSpec& spec) {
  absl::Status valid = ValidateSpec(spec, "spec");
  CheckRefusal(valid);
  if (!valid.ok()) return;
  KernelRecord record = RecordFromProto(spec);
  absl::Status limits = ValidateSpecLimits(record.spec, "spec");
  FUZZ_CHECK(limits.ok(), limits.ToString());
  FUZZ_CHECK(ValidateCompileOptions(record.spec.options).ok(), "options");
  FUZZ_CHECK(record.id == ComputeKernelId(record.spec), "kernel id");
  v1::KernelSpec again;
  RecordToProto(record, &again);
  absl::Status revalid = ValidateSpec(again, "spec");
  FUZZ_CHECK(revalid.ok(), revalid.ToString());
  KernelRecord round_trip = RecordFromProto(again);
  FUZZ_CHECK(round_trip.id == record.id, "kernel id after RecordToProto/RecordFromProto");
  FUZZ_CHECK(round_trip.arch.min_arch == record.arch.min_arch &&
                 round_trip.arch.max_arch == record.arch.max_arch,
             "arch range after RecordToProto/RecordFromProto");
}

void CheckResolve(const v1::ResolveRequest& request) {
  if (request.has_spec()) CheckSpec(request.spec());
  absl::StatusOr<ResolveQuery> checked = CheckedQueryFromProto(request);
  CheckRefusal(checked.status());
  if (!checked.ok()) return;
  // What the cache takes without checking again (daemon/cache/artifact_cache.h).
  const ResolveQuery& query = *checked;
  FUZZ_CHECK((query.record != nullptr) + query.id.has_value() + !query.name.empty() == 1,
             "a valid request names exactly one kernel");
  absl::Status device = ValidateDeviceSm(query.device.sm.major, query.device.sm.minor);
  FUZZ_CHECK(device.ok(), device.ToString());
  if (query.record != nullptr) {
    absl::Status limits = ValidateSpecLimits(query.record->spec, "spec");
    FUZZ_CHECK(limits.ok(), limits.ToString());
    absl::Status range =
        ValidateArchRange(query.record->arch.min_arch, query.record->arch.max_arch, "spec");
    FUZZ_CHECK(range.ok(), range.ToString());
  }
}

void CheckWarm(const v1::WarmRequest& request) {
  for (const v1::KernelSpec& spec : request.kernels()) CheckSpec(spec);
  CheckRefusal(ValidateWarmRequest(request));
  absl::StatusOr<std::vector<Target>> targets = TargetsFromProto(request.targets());
  CheckRefusal(targets.status());
  if (!targets.ok()) return;
  for (const Target& target : *targets) {
    absl::StatusOr<Target> again = ParseTarget(target.ToString());
    FUZZ_CHECK(again.ok() && *again == target, target.ToString());
  }
}

}  // namespace
}  // namespace kcache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* wire = reinterpret_cast<const char*>(data + 1);
  int wire_size = static_cast<int>(size - 1);
  if (data[0] % 2 == 0) {
    kcache::v1::ResolveRequest request;
    if (request.ParseFromArray(wire, wire_size)) kcache::CheckResolve(request);
  } else {
    kcache::v1::WarmRequest request;
    if (request.ParseFromArray(wire, wire_size)) kcache::CheckWarm(request);
  }
  return 0;
}
