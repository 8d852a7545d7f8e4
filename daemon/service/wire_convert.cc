#include "daemon/service/wire_convert.h"

#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/artifact.h"
#include "daemon/service/request_limits.h"

namespace kcache {

KernelRecord RecordFromProto(const v1::KernelSpec& spec) {
  KernelRecord record;
  record.spec.name = spec.name();
  record.spec.source_name = spec.source_name();
  record.spec.source = spec.source();
  for (const v1::Header& header : spec.headers()) {
    record.spec.headers[header.name()] = header.content();
  }
  record.spec.options.assign(spec.options().begin(), spec.options().end());
  record.spec.name_expressions.assign(spec.name_expressions().begin(),
                                      spec.name_expressions().end());
  record.arch.min_arch = static_cast<int>(spec.min_arch());
  record.arch.max_arch = static_cast<int>(spec.max_arch());
  record.want_ltoir = spec.want_ltoir();
  record.id = ComputeKernelId(record.spec);
  record.registered_unix_ms = NowUnixMillis();
  return record;
}

void RecordToProto(const KernelRecord& record, v1::KernelSpec* out) {
  out->set_name(record.spec.name);
  out->set_source_name(record.spec.source_name);
  out->set_source(record.spec.source);
  for (const auto& [name, content] : record.spec.headers) {
    v1::Header* header = out->add_headers();
    header->set_name(name);
    header->set_content(content);
  }
  for (const std::string& option : record.spec.options) out->add_options(option);
  for (const std::string& expr : record.spec.name_expressions) out->add_name_expressions(expr);
  out->set_min_arch(static_cast<uint32_t>(record.arch.min_arch));
  out->set_max_arch(static_cast<uint32_t>(record.arch.max_arch));
  out->set_want_ltoir(record.want_ltoir);
}

Device DeviceFromProto(const v1::Device& device) {
  Device out;
  out.sm = Sm{static_cast<int>(device.sm_major()), static_cast<int>(device.sm_minor())};
  out.driver = device.driver_version();
  return out;
}

void DeviceToProto(const Device& device, v1::Device* out) {
  out->set_sm_major(static_cast<uint32_t>(device.sm.major));
  out->set_sm_minor(static_cast<uint32_t>(device.sm.minor));
  out->set_driver_version(device.driver);
}

absl::StatusOr<ResolveQuery> CheckedQueryFromProto(const v1::ResolveRequest& request) {
  if (absl::Status valid = ValidateResolveRequest(request); !valid.ok()) return valid;
  return QueryFromProto(request);
}

ResolveQuery QueryFromProto(const v1::ResolveRequest& request) {
  ResolveQuery query;
  switch (request.kernel_case()) {
    case v1::ResolveRequest::kSpec:
      query.record = std::make_shared<const KernelRecord>(RecordFromProto(request.spec()));
      break;
    case v1::ResolveRequest::kKernelId:
      if (auto id = KernelId::FromBytes(request.kernel_id()); id.ok()) query.id = *id;
      break;
    case v1::ResolveRequest::kKernelName:
      query.name = request.kernel_name();
      break;
    case v1::ResolveRequest::KERNEL_NOT_SET:
      break;
  }
  query.device = DeviceFromProto(request.device());
  query.allow_compile = !request.no_compile();
  query.ptx_now = request.ptx_now();
  query.client = request.client();
  return query;
}

absl::StatusOr<std::vector<Target>> TargetsFromProto(
    const google::protobuf::RepeatedPtrField<std::string>& targets) {
  std::vector<Target> out;
  std::set<Target> seen;
  for (int i = 0; i < targets.size(); ++i) {
    absl::StatusOr<Target> target = ParseTarget(targets.Get(i));
    if (!target.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("targets[", i, "]: ", target.status().message()));
    }
    if (!seen.insert(*target).second) {
      return absl::InvalidArgumentError(absl::StrCat("targets[", i, "]: ", target->ToString(),
                                                     " is listed twice; list each target once"));
    }
    out.push_back(*target);
  }
  return out;
}

v1::ArtifactKind KindToProto(ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::kCubin:
      return v1::ARTIFACT_KIND_CUBIN;
    case ArtifactKind::kPtx:
      return v1::ARTIFACT_KIND_PTX;
    case ArtifactKind::kLtoir:
      return v1::ARTIFACT_KIND_LTOIR;
    case ArtifactKind::kObject:  // the launchers' objects travel on their own service
      break;
  }
  return v1::ARTIFACT_KIND_UNSPECIFIED;
}

v1::ServeRule RuleToProto(ServeRule rule) {
  switch (rule) {
    case ServeRule::kExactSass:
      return v1::SERVE_RULE_EXACT_SASS;
    case ServeRule::kCompatibleSass:
      return v1::SERVE_RULE_COMPATIBLE_SASS;
    case ServeRule::kPtxJit:
      return v1::SERVE_RULE_PTX_JIT;
    case ServeRule::kCompiled:
      return v1::SERVE_RULE_COMPILED;
  }
  return v1::SERVE_RULE_UNSPECIFIED;
}

v1::Tier TierToProto(CacheTier tier) {
  switch (tier) {
    case CacheTier::kMemory:
      return v1::TIER_MEMORY;
    case CacheTier::kLocalStore:
      return v1::TIER_LOCAL_STORE;
    case CacheTier::kBakedStore:
      return v1::TIER_BAKED_STORE;
    case CacheTier::kCompile:
      return v1::TIER_COMPILE;
    case CacheTier::kShared:
      return v1::TIER_SHARED;
  }
  return v1::TIER_UNSPECIFIED;
}

void HeaderFromServed(const Served& served, v1::ArtifactHeader* out) {
  const ArtifactMeta& meta = served.artifact->meta;
  out->set_kernel_id(std::string(meta.key.kernel_id.Bytes()));
  out->set_kernel_name(meta.kernel_name);
  out->set_kind(KindToProto(meta.key.kind));
  out->set_target(meta.key.target.ToString());
  out->set_toolkit(meta.key.toolkit);
  out->set_size(served.artifact->bytes.size());
  out->set_checksum(meta.checksum != 0 ? meta.checksum : PayloadChecksum(served.artifact->bytes));
  for (const auto& [expression, lowered] : meta.lowered_names) {
    v1::LoweredName* name = out->add_lowered_names();
    name->set_name_expression(expression);
    name->set_lowered_name(lowered);
  }
  if (meta.compile_log.size() <= kMaxHeaderLogBytes) {
    out->set_compile_log(meta.compile_log);
  } else {
    out->set_compile_log(absl::StrCat(meta.compile_log.substr(0, kMaxHeaderLogBytes), "\n[... ",
                                      meta.compile_log.size() - kMaxHeaderLogBytes,
                                      " more bytes of compile log left out]"));
  }
  out->set_compile_micros(meta.compile_micros);
  out->set_min_driver(meta.min_driver);
  out->set_rule(RuleToProto(served.rule));
  out->set_reason(served.reason);
  out->set_needs_jit(served.needs_jit());
  out->set_tier(TierToProto(served.tier));
}

void JobDoneToProto(const WarmJobResult& result, int done, int total, v1::WarmJobDone* out) {
  out->set_kernel_name(result.job.kernel != nullptr ? result.job.kernel->record.spec.name : "");
  out->set_target(result.job.target.ToString());
  out->set_outcome(std::string(WarmOutcomeName(result.outcome)));
  out->set_micros(static_cast<uint64_t>(result.micros));
  out->set_bytes(result.bytes);
  for (const std::string& kind : result.kinds) out->add_kinds(kind);
  out->set_message(result.message);
  out->set_done(static_cast<uint32_t>(done));
  out->set_total(static_cast<uint32_t>(total));
}

void SummaryToProto(const WarmSummary& summary, v1::WarmSummary* out) {
  out->set_built(static_cast<uint32_t>(summary.built));
  out->set_cached(static_cast<uint32_t>(summary.cached));
  out->set_skipped(static_cast<uint32_t>(summary.skipped));
  out->set_failed(static_cast<uint32_t>(summary.failed));
  out->set_wall_micros(static_cast<uint64_t>(summary.wall_micros));
}

void SnapshotToProto(const CacheSnapshot& snapshot, uint64_t uptime_seconds,
                     v1::StatResponse* out) {
  for (const CounterValue& counter : snapshot.counters) {
    v1::Counter* c = out->add_counters();
    c->set_name(counter.name);
    c->set_value(counter.value);
    c->set_help(counter.help);
  }
  out->set_store_artifacts(snapshot.writable().artifacts);
  out->set_store_bytes(snapshot.writable().artifact_bytes);
  out->set_memory_bytes(snapshot.memory_bytes);
  out->set_memory_entries(snapshot.memory_entries);
  for (const std::string& toolkit : snapshot.toolkits) out->add_toolkits(toolkit);
  out->set_uptime_seconds(uptime_seconds);
}

std::string ListedName(const std::string& name) {
  if (name.size() <= kMaxListedNameBytes) return name;
  std::string more = absl::StrCat("... (", name.size(), " bytes)");
  return absl::StrCat(absl::string_view(name).substr(0, kMaxListedNameBytes - more.size()), more);
}

void ListedToProto(const ListedKernelInfo& info, v1::ListResponse* out) {
  v1::ListedKernel* kernel = out->add_kernels();
  kernel->set_kernel_id(std::string(info.record.id.Bytes()));
  kernel->set_name(ListedName(info.record.spec.name));
  kernel->set_min_arch(static_cast<uint32_t>(info.record.arch.min_arch));
  kernel->set_max_arch(static_cast<uint32_t>(info.record.arch.max_arch));
  for (const ListedArtifactInfo& artifact : info.artifacts) {
    v1::ListedArtifact* a = kernel->add_artifacts();
    a->set_kind(KindToProto(artifact.meta.key.kind));
    a->set_target(artifact.meta.key.target.ToString());
    a->set_toolkit(artifact.meta.key.toolkit);
    a->set_size(artifact.meta.size);
    a->set_tier(TierToProto(artifact.tier));
  }
}

void ListedToProto(const std::vector<ListedKernelInfo>& kernels, v1::ListResponse* out) {
  for (const ListedKernelInfo& info : kernels) ListedToProto(info, out);
}

void ListedPageToProto(std::vector<ListedKernelInfo> kernels, const std::string& after,
                       v1::ListResponse* out) {
  std::sort(kernels.begin(), kernels.end(),
            [](const auto& a, const auto& b) { return a.record.id.Bytes() < b.record.id.Bytes(); });
  for (const ListedKernelInfo& info : kernels) {
    std::string id(info.record.id.Bytes());
    if (!after.empty() && id <= after) continue;
    if (out->kernels_size() > 0 && out->ByteSizeLong() >= kListPageBytes) {
      out->set_next_page_after(out->kernels(out->kernels_size() - 1).kernel_id());
      return;
    }
    ListedToProto(info, out);
  }
}

}  // namespace kcache
