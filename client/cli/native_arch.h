// `kcache warm --arch native`: the SMs of the GPUs this machine's process sees, in place of the
// word "native" in an --arch list.
#ifndef KCACHE_CLIENT_CLI_NATIVE_ARCH_H_
#define KCACHE_CLIENT_CLI_NATIVE_ARCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kcache/device.h"

namespace kcache::cli {

// Whether the comma-separated --arch list names "native".
bool NamesNative(absl::string_view arch);

// `arch` with the item "native" replaced by the distinct SMs of `gpus` ("8.9,9.0"), in the
// driver's order, leaving out an SM the list already names. InvalidArgument (bad input) when
// there is no GPU: the message carries the detection's reason and says to give the SMs.
absl::StatusOr<std::string> ExpandNativeArch(
    absl::string_view arch, const absl::StatusOr<std::vector<client::GpuInfo>>& gpus);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_NATIVE_ARCH_H_
