// CUDA_VISIBLE_DEVICES, read the way the CUDA driver reads it.
#include "client/lib/visible_devices.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kcache::client {
namespace {

bool IsIndex(absl::string_view entry) {
  if (entry.empty()) return false;
  for (char c : entry) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

bool IsUuid(absl::string_view entry) {
  return (absl::StartsWith(entry, "GPU-") || absl::StartsWith(entry, "MIG-")) && entry.size() > 4;
}

}  // namespace

VisibleDevices ParseVisibleDevices(const char* value) {
  VisibleDevices out;
  if (value == nullptr) return out;
  out.set = true;
  out.value = value;
  for (absl::string_view entry : absl::StrSplit(out.value, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (!IsIndex(entry) && !IsUuid(entry)) {
      out.stopped_at = std::string(entry);
      break;
    }
    out.entries.emplace_back(entry);
  }
  return out;
}

void LabelVisibleGpus(const VisibleDevices& visible, std::vector<GpuInfo>* gpus) {
  if (!visible.set || visible.entries.size() != gpus->size()) return;
  for (size_t i = 0; i < gpus->size(); ++i) {
    GpuInfo& gpu = (*gpus)[i];
    gpu.visible_as = visible.entries[i];
    if (absl::StartsWith(gpu.visible_as, "MIG-")) gpu.uuid = gpu.visible_as;
  }
}

std::string WhyNoGpu(const VisibleDevices& visible) {
  if (!visible.set) return "";
  std::string quoted = absl::StrCat("CUDA_VISIBLE_DEVICES='", visible.value, "'");
  if (absl::StripAsciiWhitespace(visible.value).empty()) {
    return absl::StrCat(quoted, " hides every GPU");
  }
  if (visible.entries.empty()) {
    return absl::StrCat(quoted, ": its first entry '", visible.stopped_at.value_or(""),
                        "' is not a device index, a GPU-UUID or a MIG-UUID, so the driver "
                        "ignores it and every entry after it");
  }
  return absl::StrCat(quoted, " selects no GPU this machine has");
}

}  // namespace kcache::client
