// An example inference worker's start-up: find its GPUs (every one the process sees, or the
// node --device pretends), get every kernel of a manifest for each distinct SM (from kcached
// through libkcache in one call for the node, or compiled in-process with NVRTC as workers do
// without a cache), load each GPU's own on it, and report per GPU how long it all took.
#ifndef KCACHE_EXAMPLES_WORKER_WORKER_H_
#define KCACHE_EXAMPLES_WORKER_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kcache::example {

struct WorkerFlags {
  std::string manifest;
  std::string server;  // kcached address; "" = libkcache's default
  // "8.9" per GPU: resolve for these SMs instead of the detected GPUs (a pretend node; GPU i
  // loads its kernels when the machine's GPU i has that SM).
  std::vector<std::string> devices;
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
