// --arch native and --device lists (node_devices.h).
#include "client/cli/node_devices.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kcache::cli {
namespace {

constexpr absl::string_view kNative = "native";

std::vector<std::string> Items(absl::string_view arch) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(arch, ',')) {
    items.emplace_back(absl::StripAsciiWhitespace(item));
  }
  return items;
}

}  // namespace

bool NamesNative(absl::string_view arch) {
  std::vector<std::string> items = Items(arch);
  return std::find(items.begin(), items.end(), kNative) != items.end();
}

absl::StatusOr<std::string> ExpandNativeArch(
    absl::string_view arch, const absl::StatusOr<std::vector<client::GpuInfo>>& gpus) {
  if (!gpus.ok() || gpus->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--arch native takes the SMs of this machine's GPUs, and it has none (",
        gpus.ok() ? "the driver lists no GPU" : gpus.status().message(),
        "); give the SMs to warm for, e.g. --arch 7.5,8.6,8.9 (the union of your fleet's)"));
  }
  std::vector<std::string> items = Items(arch);
  std::vector<std::string> native;
  for (const client::GpuInfo& gpu : *gpus) {
    std::string sm = gpu.device.ToString();
    bool named = std::find(items.begin(), items.end(), sm) != items.end() ||
                 std::find(native.begin(), native.end(), sm) != native.end();
    if (!named) native.push_back(sm);
  }
  std::vector<std::string> out;
  for (const std::string& item : items) {
    if (item != kNative) {
      out.push_back(item);
    } else if (!native.empty()) {
      out.insert(out.end(), native.begin(), native.end());
      native.clear();  // a second "native" adds nothing
    }
  }
  return absl::StrJoin(out, ",");
}

bool IsDeviceList(absl::string_view text) { return absl::StrContains(text, ','); }

absl::StatusOr<std::vector<client::Device>> ParseDeviceList(absl::string_view text,
                                                            uint32_t driver) {
  std::vector<client::Device> devices;
  for (const std::string& item : Items(text)) {
    absl::StatusOr<client::Device> device = client::Device::Parse(item, driver);
    if (!device.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("'", item, "': ", device.status().message()));
    }
    bool seen = std::any_of(devices.begin(), devices.end(),
                            [&](const client::Device& d) { return d.arch() == device->arch(); });
    if (!seen) devices.push_back(*device);
  }
  return devices;
}

}  // namespace kcache::cli
