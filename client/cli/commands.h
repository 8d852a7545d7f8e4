// The `kcache` command-line tool. Each command family registers its subcommand on the app;
// RunCli parses and runs the chosen one. Exit codes are in output.h.
#ifndef KCACHE_CLIENT_CLI_COMMANDS_H_
#define KCACHE_CLIENT_CLI_COMMANDS_H_

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "daemon/compile/toolkit.h"
#include "daemon/store/store.h"

namespace kcache::cli {

// Runs the tool; returns the process exit code.
int RunCli(int argc, char** argv);

// Each sets *exit_code when its subcommand runs.
void RegisterWarmCommand(CLI::App& app, int* exit_code);   // warm
void RegisterStoreCommands(CLI::App& app, int* exit_code); // ls, stat, get
// (warm, ls, stat and get take --server ADDR instead of --store DIR: server_commands.h;
// doctor: doctor.h)

// Opens a store for a command, with errors that say which flag to fix.
absl::StatusOr<std::unique_ptr<Store>> OpenStoreForCli(const std::string& path, bool read_only);

// Loads the toolkit at `root` ("" = $CUDA_HOME or /usr/local/cuda).
absl::StatusOr<std::shared_ptr<const Toolkit>> LoadToolkitForCli(const std::string& root);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_COMMANDS_H_
