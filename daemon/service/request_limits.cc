#include "daemon/service/request_limits.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/compile_options.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// What a proto carries that the core spec cannot show: a header sent twice (the spec keeps one).
absl::Status CheckDuplicateHeaders(const v1::KernelSpec& spec, absl::string_view field) {
  std::set<std::string> names;
  for (int i = 0; i < spec.headers_size(); ++i) {
    if (!names.insert(spec.headers(i).name()).second) {
      return Invalid(absl::StrCat(field, ".headers[", i, "]"),
                     absl::StrCat("header '", spec.headers(i).name(),
                                  "' appears twice; send each header once"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSpec(const v1::KernelSpec& spec, absl::string_view field) {
  if (spec.headers_size() > static_cast<int>(kMaxSpecHeaders)) {  // before copying them
    return Invalid(field, absl::StrCat("has ", spec.headers_size(), " headers; the limit is ",
                                       kMaxSpecHeaders));
  }
  if (absl::Status s = CheckDuplicateHeaders(spec, field); !s.ok()) return s;
  KernelSpec core;
  core.name = spec.name();
  core.source_name = spec.source_name();
  core.source = spec.source();
  for (const v1::Header& header : spec.headers()) core.headers[header.name()] = header.content();
  core.options.assign(spec.options().begin(), spec.options().end());
  core.name_expressions.assign(spec.name_expressions().begin(), spec.name_expressions().end());
  if (absl::Status s = ValidateSpecLimits(core, field); !s.ok()) return s;
  if (absl::Status s = ValidateCompileOptions(core.options); !s.ok()) {
    return Invalid(absl::StrCat(field, ".options"), s.message());
  }
  return ValidateArchRange(spec.min_arch(), spec.max_arch(), field);
}

absl::Status ValidateDevice(const v1::Device& device, bool present) {
  if (!present || device.sm_major() == 0) {
    return Invalid("device",
                   "sm_major is 0; send the device's compute capability, e.g. "
                   "sm_major 8, sm_minor 9 for an SM 8.9 GPU");
  }
  return ValidateDeviceSm(device.sm_major(), device.sm_minor());
}

absl::Status ValidateResolveRequest(const v1::ResolveRequest& request) {
  switch (request.kernel_case()) {
    case v1::ResolveRequest::kSpec:
      if (absl::Status s = ValidateSpec(request.spec(), "spec"); !s.ok()) return s;
      break;
    case v1::ResolveRequest::kKernelId:
      if (request.kernel_id().size() != KernelId::kSize) {
        return Invalid("kernel_id", absl::StrCat("is ", request.kernel_id().size(),
                                                 " bytes; send the 32 raw bytes of the "
                                                 "SHA-256 kernel id (not its hex text)"));
      }
      break;
    case v1::ResolveRequest::kKernelName:
      if (request.kernel_name().empty() || request.kernel_name().size() > kMaxKernelNameBytes) {
        return Invalid("kernel_name", absl::StrCat("must be 1..", kMaxKernelNameBytes,
                                                   " bytes (a name `kcache ls` shows)"));
      }
      break;
    case v1::ResolveRequest::KERNEL_NOT_SET:
      return Invalid("ResolveRequest", "no kernel; set one of spec, kernel_id or kernel_name");
  }
  return ValidateDevice(request.device(), request.has_device());
}

absl::Status ValidateResolveManyRequest(const v1::ResolveManyRequest& request) {
  if (request.kernels_size() == 0) {
    return Invalid("ResolveManyRequest", "no kernels; send at least one ResolveRequest");
  }
  if (request.kernels_size() > static_cast<int>(kMaxResolveManyEntries)) {
    return Invalid("ResolveManyRequest",
                   absl::StrCat(request.kernels_size(), " kernels; the limit is ",
                                kMaxResolveManyEntries, ": send the rest in another call"));
  }
  return absl::OkStatus();
}

absl::Status ValidateWarmRequest(const v1::WarmRequest& request) {
  if (request.kernels_size() == 0) {
    return Invalid("WarmRequest", "no kernels; send at least one KernelSpec");
  }
  if (request.targets_size() == 0) {
    return Invalid("WarmRequest", "no targets; send architectures such as \"8.6\" or \"9.0a\"");
  }
  if (request.targets_size() > static_cast<int>(kMaxWarmTargets)) {
    return Invalid("WarmRequest", absl::StrCat(request.targets_size(), " targets; the limit is ",
                                               kMaxWarmTargets));
  }
  for (int i = 0; i < request.kernels_size(); ++i) {
    if (absl::Status s = ValidateSpec(request.kernels(i), absl::StrCat("kernels[", i, "]"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBuildFromPtxRequest(const v1::BuildFromPtxRequest& request) {
  if (request.ptx().empty()) {
    return Invalid("ptx", "empty; send the PTX module's text, as the load was given it");
  }
  if (request.ptx().size() > kMaxBuildPtxBytes) {
    return Invalid("ptx",
                   absl::StrCat(request.ptx().size(), " bytes; the limit is ", kMaxBuildPtxBytes,
                                ": leave the module to the driver, or bake its SASS with "
                                "`kcache warm --library`"));
  }
  if (request.client().size() > kMaxClientBytes) {
    return Invalid("client",
                   absl::StrCat(request.client().size(), " bytes; the limit is ", kMaxClientBytes));
  }
  for (char c : request.client()) {
    if (c < 0x20 || c > 0x7e) {
      return Invalid("client", "holds a byte that is not printable ASCII; name the client plainly");
    }
  }
  return ValidateDevice(request.device(), request.has_device());
}

}  // namespace kcache
