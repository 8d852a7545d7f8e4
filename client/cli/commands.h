// The `kcache` command-line tool. Each command family registers its subcommand on the app;
// RunCli parses and runs the chosen one. Exit codes are in output.h.
#ifndef KCACHE_CLIENT_CLI_COMMANDS_H_
#define KCACHE_CLIENT_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/compile/toolkit.h"
#include "engine/store/store.h"

namespace kcache::cli {

// Runs the tool; returns the process exit code.
int RunCli(int argc, char** argv);

// Each sets *exit_code when its subcommand runs.
void RegisterWarmCommand(CLI::App& app, int* exit_code);          // warm
void RegisterBakeManifestCommand(CLI::App& app, int* exit_code);  // bake-manifest
void RegisterStoreCommands(CLI::App& app, int* exit_code);        // ls, stat, get
// (warm, ls, stat and get take --server ADDR instead of --store DIR: server_commands.h;
// doctor: doctor.h)

// How a command uses its --store. Only `kcache warm` creates a store; a command that reads
// (ls, stat, doctor, get) never does, so a mistyped path is an error, not a new empty store.
enum class StoreUse {
  kRead,           // reads only (opened read-only)
  kReadAndFill,    // reads, and writes what it compiles into the existing store (`get`)
  kCreateOrWrite,  // creates the store when absent (`warm`)
};

// Opens a store for a command. InvalidArgument "'<path>' is not a kcache store ..." (naming
// `kcache warm` as the way to make one) when `use` may not create it and it is absent, empty
// or something else; other errors as OpenStore gives them.
absl::StatusOr<std::unique_ptr<Store>> OpenStoreForCli(const std::string& path, StoreUse use);

// Opens the store directory for a launcher or `kcache run` (made when absent), waiting up to
// 120 s while another launcher holds it; a store that cannot be written (a baked, read-only
// one) is opened read-only.
absl::StatusOr<std::unique_ptr<Store>> OpenLauncherStore(const std::string& path);

// Loads the toolkit at `root` ("" = $CUDA_HOME or /usr/local/cuda).
absl::StatusOr<std::shared_ptr<const Toolkit>> LoadToolkitForCli(const std::string& root);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_COMMANDS_H_
