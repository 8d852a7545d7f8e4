// CUDA_VISIBLE_DEVICES as the CUDA driver reads it: which entries select GPUs, which it ignores,
// and the label each detected GPU gets. The driver does the selecting; this only explains it
// (a GPU's entry, why no GPU is seen), so it is pure and tested without a GPU.
#ifndef KCACHE_CLIENT_LIB_VISIBLE_DEVICES_H_
#define KCACHE_CLIENT_LIB_VISIBLE_DEVICES_H_

#include <optional>
#include <string>
#include <vector>

#include "kcache/device.h"

namespace kcache::client {

struct VisibleDevices {
  bool set = false;  // the variable is in the environment
  std::string value;
  // The entries the driver takes, in order: a device index ("1"), a GPU UUID or its prefix
  // ("GPU-8f2c..."), a MIG instance ("MIG-..."), blanks trimmed.
  std::vector<std::string> entries;
  // The first entry the driver does not understand ("-1", "x", "" between two commas); the
  // driver ignores it and every entry after it. nullopt when it takes every entry.
  std::optional<std::string> stopped_at;
};

// Parses the variable's value; null = unset.
VisibleDevices ParseVisibleDevices(const char* value);

// Sets each GPU's visible_as to its entry when the entries match the GPUs one to one (the
// driver's ordinal i is the i-th entry), and uuid to the entry for a MIG instance named by one.
void LabelVisibleGpus(const VisibleDevices& visible, std::vector<GpuInfo>* gpus);

// A clause explaining a driver that sees no GPU, or "" when the variable is not why:
// "CUDA_VISIBLE_DEVICES='' hides every GPU" / "... its first entry '-1' is not an index or a
// UUID, so the driver ignores it and the rest".
std::string WhyNoGpu(const VisibleDevices& visible);

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_VISIBLE_DEVICES_H_
