// The `--server ADDR` forms of get, ls, stat and warm, and export-manifest: the same commands
// answered by a running kcached through libkcache instead of by a store directory.
#ifndef KCACHE_CLIENT_CLI_SERVER_COMMANDS_H_
#define KCACHE_CLIENT_CLI_SERVER_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kcache::cli {

struct ServerGetFlags {
  std::string server;
  std::string device;
  uint32_t driver = 0;
  std::vector<std::string> kernels;  // names, or 64 hex digits
  std::string output;                // a file; a directory with several kernels
  bool no_compile = false;
  bool ptx_now = false;
  bool json = false;
  double timeout_s = 60;
  bool fatbin = false;       // with a device list: DIR/NAME.fatbin of each distinct SM's cubin
  std::string toolkit_root;  // whose fatbinary builds it; "" = the default toolkit
  bool progress = false;     // print the daemon's compile progress even when stderr is no terminal
};

struct ServerWarmFlags {
  std::string server;
  std::string arch;
  std::string manifest;
  int jobs = 0;
};

// Usage error (exit 2) unless exactly one of --store and --server was given.
absl::Status CheckStoreOrServer(const std::string& store, const std::string& server);

int RunGetOnServer(const ServerGetFlags& flags);

// `kcache get -o DIR` with several kernels: makes DIR (InvalidArgument naming it when that
// fails; nothing to do without -o). OutputPathFor: the file in DIR a served artifact is
// written to, DIR/NAME.TARGET.KIND ("saxpy.sm_89.cubin").
absl::Status PrepareOutputDir(const std::string& dir);
std::string OutputPathFor(const std::string& dir, const std::string& kernel_name,
                          const std::string& target, const std::string& kind);
int RunLsOnServer(const std::string& server, bool json, double timeout_s);
int RunStatOnServer(const std::string& server, bool json, double timeout_s);
int RunWarmOnServer(const ServerWarmFlags& flags);

// export-manifest --server ADDR [-o FILE]
void RegisterServerCommands(CLI::App& app, int* exit_code);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_SERVER_COMMANDS_H_
