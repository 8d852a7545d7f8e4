// kcache-example-worker: starts the way an inference worker does. Flags here; the work is in
// worker.cc.
#include <CLI/CLI.hpp>

#include "examples/worker/worker.h"

int main(int argc, char** argv) {
  kcache::example::WorkerFlags flags;
  CLI::App app{
      "An example inference worker: detects its GPUs (or takes --device, repeated for a node),\n"
      "gets every kernel of a manifest for each distinct SM from kcached in one call (or, with\n"
      "--no-cache, compiles them in-process with NVRTC), loads each GPU's own on it, and prints\n"
      "per GPU how long each took and how it was served."};
  app.name("kcache-example-worker");
  app.add_option("--manifest", flags.manifest, "Kernel manifest (docs/manifest.md)")->required();
  app.add_option("--server", flags.server,
                 "kcached address (default $KCACHE_ADDRESS, else unix:///run/kcache/kcache.sock)");
  app.add_option("--device", flags.devices,
                 "Resolve for this SM (e.g. 8.9) instead of the GPUs; repeat it to pretend a node "
                 "(--device 7.5 --device 8.6)");
  app.add_option("--driver", flags.driver, "With --device: the driver version, e.g. 13000");
  app.add_flag("--no-cache", flags.no_cache,
               "Compile every kernel in this process with NVRTC, as workers do without kcache");
  app.add_flag("--json", flags.json, "Print a JSON report");
  app.add_option("--deadline-ms", flags.deadline_ms, "Deadline of each daemon call (default 2000)")
      ->check(CLI::PositiveNumber);
  app.add_option("--toolkit", flags.toolkit,
                 "CUDA toolkit for local compiles (default: $CUDA_HOME, else /usr/local/cuda)");
  auto* server = app.get_option("--server");
  app.get_option("--no-cache")->excludes(server);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return kcache::example::RunWorker(flags);
}
