// An example inference worker's start-up: find the device, get every kernel of a manifest
// (from kcached through libkcache, or compiled in-process with NVRTC as workers do without a
// cache), load them on the GPU when there is one, and report how long it all took.
#ifndef KCACHE_EXAMPLES_WORKER_WORKER_H_
#define KCACHE_EXAMPLES_WORKER_WORKER_H_

#include <cstdint>
#include <string>

namespace kcache::example {

struct WorkerFlags {
  std::string manifest;
  std::string server;     // kcached address; "" = libkcache's default
  std::string device;     // "8.9": resolve for this SM instead of the detected GPU
  uint32_t driver = 0;    // with --device: the driver version to report (0 = detected/unknown)
  bool no_cache = false;  // compile every kernel in-process with NVRTC
  bool json = false;
  int64_t deadline_ms = 2000;
  std::string toolkit;  // for local compiles
};

// Exit codes: 0 every kernel served (or skipped by its arch range), 1 some failed,
// 2 bad input (manifest, device) or no GPU and no --device.
int RunWorker(const WorkerFlags& flags);

}  // namespace kcache::example

#endif  // KCACHE_EXAMPLES_WORKER_WORKER_H_
