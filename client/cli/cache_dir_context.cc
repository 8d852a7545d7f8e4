#include "client/cli/cache_dir_context.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/run_environment.h"
#include "engine/cache_dirs/installed_versions.h"
#include "kcache/device.h"

namespace kcache::cli {

absl::StatusOr<KeyContext> KeyContextFor(const objects::ToolLookup& lookup,
                                         absl::string_view arch) {
  absl::StatusOr<std::string> toolkit_root = RealToolkitRoot(lookup);
  if (!toolkit_root.ok()) return toolkit_root.status();
  KeyContext out;
  cache_dirs::CacheDirContext& context = out.context;
  context.env = lookup.env;
  context.versions = cache_dirs::InstalledVersions(cache_dirs::SiteDirectories(context.env));
  if (!toolkit_root->empty()) context.toolkit = cache_dirs::ToolkitIdentity(*toolkit_root);
  std::vector<std::string> declared;
  for (absl::string_view sm : absl::StrSplit(arch, ',', absl::SkipEmpty())) {
    absl::StatusOr<client::Device> device = client::Device::Parse(sm);
    if (!device.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--arch ", arch, ": ", device.status().message()));
    }
    declared.push_back(device->ToString());
  }
  absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
  if (gpus.ok() && !gpus->empty()) {
    out.sms_from = "the GPUs seen";
    for (const client::GpuInfo& gpu : *gpus) context.sms.push_back(gpu.device.ToString());
  } else if (!declared.empty()) {
    out.sms_from = "--arch (no GPU seen)";
    context.sms = std::move(declared);
  } else {
    out.sms_from =
        "none: no GPU seen and no --arch (an image's build declares its SMs with --arch)";
  }
  if (absl::StatusOr<uint32_t> driver = client::DriverVersion(); driver.ok()) {
    context.driver = std::to_string(*driver);
  }
  return out;
}

absl::StatusOr<std::vector<cache_dirs::CacheDirSpec>> CacheDirSpecs(
    const std::vector<std::string>& user_dirs) {
  std::vector<cache_dirs::CacheDirSpec> specs = cache_dirs::KnownCacheDirs();
  if (specs.empty()) {
    return absl::InternalError("kcache's cache directory table did not parse (a build defect)");
  }
  for (const std::string& flag : user_dirs) {
    absl::StatusOr<cache_dirs::CacheDirSpec> mine = cache_dirs::ParseUserCacheDir(flag);
    if (!mine.ok()) return mine.status();
    specs.push_back(*std::move(mine));
  }
  return specs;
}

}  // namespace kcache::cli
