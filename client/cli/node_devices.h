// The devices of a node on the command line: `kcache warm --arch native` (the SMs of the GPUs
// this machine's process sees) and `kcache get --device 7.5,8.6` (a list of devices).
#ifndef KCACHE_CLIENT_CLI_NODE_DEVICES_H_
#define KCACHE_CLIENT_CLI_NODE_DEVICES_H_

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

// Whether a --device value is a list (has a comma): a node, its artifacts written into -o DIR.
bool IsDeviceList(absl::string_view text);

// The devices of a --device list ("8.9", or "7.5,8.6" for a node), each with `driver`, in the
// order given, a repeated SM once. InvalidArgument naming the item that is not an SM.
absl::StatusOr<std::vector<client::Device>> ParseDeviceList(absl::string_view text,
                                                            uint32_t driver);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_NODE_DEVICES_H_
