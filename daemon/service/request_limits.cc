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

absl::Status CheckNoNul(const std::string& text, absl::string_view field) {
  size_t nul = text.find('\0');
  if (nul == std::string::npos) return absl::OkStatus();
  return Invalid(field, absl::StrCat("contains a NUL byte at offset ", nul,
                                     "; NVRTC reads C strings, so send text without NUL bytes"));
}

absl::Status CheckShortField(const std::string& text, absl::string_view field) {
  if (text.size() > kMaxShortField) {
    return Invalid(field,
                   absl::StrCat("is ", text.size(), " bytes; the limit is ", kMaxShortField));
  }
  return CheckNoNul(text, field);
}

absl::Status CheckCounts(const v1::KernelSpec& spec, absl::string_view field) {
  if (spec.headers_size() > static_cast<int>(kMaxSpecHeaders)) {
    return Invalid(field, absl::StrCat("has ", spec.headers_size(), " headers; the limit is ",
                                       kMaxSpecHeaders));
  }
  if (spec.options_size() > static_cast<int>(kMaxSpecOptions)) {
    return Invalid(field, absl::StrCat("has ", spec.options_size(), " options; the limit is ",
                                       kMaxSpecOptions));
  }
  if (spec.name_expressions_size() > static_cast<int>(kMaxNameExpressions)) {
    return Invalid(field, absl::StrCat("has ", spec.name_expressions_size(),
                                       " name expressions; the limit is ", kMaxNameExpressions));
  }
  return absl::OkStatus();
}

absl::Status CheckHeaders(const v1::KernelSpec& spec, absl::string_view field, size_t* bytes) {
  std::set<std::string> names;
  for (int i = 0; i < spec.headers_size(); ++i) {
    const v1::Header& header = spec.headers(i);
    std::string where = absl::StrCat(field, ".headers[", i, "]");
    if (header.name().empty()) {
      return Invalid(where, "has no name; give the name the source #includes, e.g. \"op.cuh\"");
    }
    if (absl::Status s = CheckShortField(header.name(), where + ".name"); !s.ok()) return s;
    if (absl::Status s = CheckNoNul(header.content(), where + ".content"); !s.ok()) return s;
    if (!names.insert(header.name()).second) {
      return Invalid(
          where, absl::StrCat("header '", header.name(), "' appears twice; send each header once"));
    }
    *bytes += header.name().size() + header.content().size();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSpec(const v1::KernelSpec& spec, absl::string_view field) {
  if (spec.source().empty()) {
    return Invalid(field, "source is empty; send the kernel's CUDA C++ source text");
  }
  if (spec.name().size() > kMaxKernelNameBytes) {
    return Invalid(field, absl::StrCat("name is ", spec.name().size(), " bytes; the limit is ",
                                       kMaxKernelNameBytes));
  }
  if (spec.source_name().size() > kMaxSourceNameBytes) {
    return Invalid(field, absl::StrCat("source_name is ", spec.source_name().size(),
                                       " bytes; the limit is ", kMaxSourceNameBytes));
  }
  if (absl::Status s = CheckNoNul(spec.source_name(), absl::StrCat(field, ".source_name"));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCounts(spec, field); !s.ok()) return s;
  if (absl::Status s = CheckNoNul(spec.source(), absl::StrCat(field, ".source")); !s.ok()) {
    return s;
  }
  size_t bytes = spec.source().size();
  if (absl::Status s = CheckHeaders(spec, field, &bytes); !s.ok()) return s;
  for (int i = 0; i < spec.options_size(); ++i) {
    std::string where = absl::StrCat(field, ".options[", i, "]");
    if (absl::Status s = CheckShortField(spec.options(i), where); !s.ok()) return s;
    bytes += spec.options(i).size();
  }
  for (int i = 0; i < spec.name_expressions_size(); ++i) {
    std::string where = absl::StrCat(field, ".name_expressions[", i, "]");
    if (absl::Status s = CheckShortField(spec.name_expressions(i), where); !s.ok()) return s;
    bytes += spec.name_expressions(i).size();
  }
  if (bytes > kMaxSpecBytes) {
    return Invalid(field,
                   absl::StrCat("is ", bytes,
                                " bytes of source, headers and options; "
                                "the limit is ",
                                kMaxSpecBytes, " (3 MiB): split the kernel or trim its headers"));
  }
  std::vector<std::string> options(spec.options().begin(), spec.options().end());
  if (absl::Status s = ValidateCompileOptions(options); !s.ok()) {
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

}  // namespace kcache
