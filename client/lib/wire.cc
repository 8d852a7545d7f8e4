#include "client/lib/wire.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kcache::client {

void ToWire(const KernelSource& source, v1::KernelSpec* out) {
  out->set_name(source.name);
  out->set_source_name(source.source_name);
  out->set_source(source.source);
  for (const auto& [name, content] : source.headers) {
    v1::Header* header = out->add_headers();
    header->set_name(name);
    header->set_content(content);
  }
  for (const std::string& option : source.options) out->add_options(option);
  for (const std::string& expr : source.name_expressions) out->add_name_expressions(expr);
  out->set_min_arch(static_cast<uint32_t>(std::max(source.min_arch, 0)));
  out->set_max_arch(static_cast<uint32_t>(std::max(source.max_arch, 0)));
  out->set_want_ltoir(source.want_ltoir);
}

void ToWire(const Device& device, v1::Device* out) {
  out->set_sm_major(static_cast<uint32_t>(std::max(device.sm_major, 0)));
  out->set_sm_minor(static_cast<uint32_t>(std::max(device.sm_minor, 0)));
  out->set_driver_version(device.driver_version);
}

ArtifactKind FromWire(v1::ArtifactKind kind) {
  switch (kind) {
    case v1::ARTIFACT_KIND_PTX:
      return ArtifactKind::kPtx;
    case v1::ARTIFACT_KIND_LTOIR:
      return ArtifactKind::kLtoir;
    default:
      return ArtifactKind::kCubin;
  }
}

ServedFrom FromWire(v1::Tier tier) {
  switch (tier) {
    case v1::TIER_MEMORY:
      return ServedFrom::kDaemonMemory;
    case v1::TIER_LOCAL_STORE:
      return ServedFrom::kDaemonLocalStore;
    case v1::TIER_BAKED_STORE:
      return ServedFrom::kDaemonBakedStore;
    case v1::TIER_COMPILE:
      return ServedFrom::kDaemonCompile;
    case v1::TIER_SHARED:
      return ServedFrom::kDaemonShared;
    default:
      return ServedFrom::kDaemonUnknownTier;
  }
}

ServeRule FromWire(v1::ServeRule rule) {
  switch (rule) {
    case v1::SERVE_RULE_COMPATIBLE_SASS:
      return ServeRule::kCompatibleSass;
    case v1::SERVE_RULE_PTX_JIT:
      return ServeRule::kPtxJit;
    case v1::SERVE_RULE_COMPILED:
      return ServeRule::kCompiled;
    default:
      return ServeRule::kExactSass;
  }
}

CompileProgress FromWire(const v1::ResolveProgress& progress, size_t index) {
  CompileProgress out;
  out.index = index;
  switch (progress.stage()) {
    case v1::COMPILE_STAGE_QUEUED:
      out.stage = CompileProgress::Stage::kQueued;
      break;
    case v1::COMPILE_STAGE_COMPILING:
      out.stage = CompileProgress::Stage::kCompiling;
      break;
    case v1::COMPILE_STAGE_SHARED:
      out.stage = CompileProgress::Stage::kShared;
      break;
    default:  // a stage this client does not know: unknown
      break;
  }
  out.queued_behind = progress.queued_behind();
  out.elapsed = absl::Milliseconds(progress.elapsed_ms());
  out.compiling_for = absl::Milliseconds(progress.compile_elapsed_ms());
  out.expected = absl::Milliseconds(progress.expected_ms());
  return out;
}

FetchedKernel FromWireHeader(const v1::ArtifactHeader& header) {
  FetchedKernel k;
  k.kind = FromWire(header.kind());
  k.target = header.target();
  k.kernel_id = absl::BytesToHexString(header.kernel_id());
  k.kernel_name = header.kernel_name();
  k.toolkit = header.toolkit();
  k.rule = FromWire(header.rule());
  k.reason = header.reason();
  k.needs_jit = header.needs_jit();
  for (const v1::LoweredName& ln : header.lowered_names()) {
    k.lowered_names.emplace_back(ln.name_expression(), ln.lowered_name());
  }
  k.compile_log = header.compile_log();
  k.min_driver = header.min_driver();
  k.served_from = FromWire(header.tier());
  return k;
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool IsDaemonFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

std::string GrpcTarget(const std::string& address) {
  if (absl::StartsWith(address, "/")) return absl::StrCat("unix:", address);
  return address;
}

}  // namespace kcache::client
