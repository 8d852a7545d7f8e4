// An example inference worker's start-up: find the device, get every kernel of a manifest
// (from kcached through libkcache, or compiled in-process with NVRTC as workers do without a
// cache), load them on the GPU when there is one, and report how long it all took.
#ifndef KCACHE_EXAMPLES_WORKER_WORKER_H_
#define KCACHE_EXAMPLES_WORKER_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kcache/kcache.h"

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

struct KernelReport {
  std::string name;
  std::string outcome;  // "served", "skipped", "failed"
  std::string target, kind, rule, served_from, reason;
  uint64_t bytes = 0;
  int64_t resolve_micros = 0;
  int64_t load_micros = -1;  // -1: not loaded
};

// One start, as RunWorker makes it before printing.
struct WorkerStart {
  int exit_code = 0;  // RunWorker's (below); on 2 nothing else is set
  client::Device device;
  std::string device_note;  // how the device was chosen
  std::string gpu;          // the GPU the kernels were loaded on; "" = none
  std::string mode;         // where the kernels came from
  std::vector<KernelReport> reports;
  // From reading the manifest to the last kernel's answer (device, client, batch and loads
  // included); what a worker waits for, process start-up excluded. bench/startup times it.
  int64_t total_micros = 0;
};

// Reads the manifest, picks the device, makes the client and gets every kernel; errors of
// bad input go to stderr (exit_code 2).
WorkerStart StartWorker(const WorkerFlags& flags);

// StartWorker, then prints its report. Exit codes: 0 every kernel served (or skipped by its arch range), 1 some failed,
// 2 bad input (manifest, device) or no GPU and no --device.
int RunWorker(const WorkerFlags& flags);

}  // namespace kcache::example

#endif  // KCACHE_EXAMPLES_WORKER_WORKER_H_
