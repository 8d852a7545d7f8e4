// `kcache cache-dirs`: the inference libraries' JIT cache directories kcache knows
// (engine/cache_dirs/cache_dirs.yaml; docs/cache-dirs.md), resolved for this environment: where
// each is, what it holds, the version of its library and the key a snapshot of it would have.
#ifndef KCACHE_CLIENT_CLI_CACHE_DIRS_COMMAND_H_
#define KCACHE_CLIENT_CLI_CACHE_DIRS_COMMAND_H_

#include <CLI/CLI.hpp>

namespace kcache::cli {

void RegisterCacheDirsCommand(CLI::App& app, int* exit_code);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_CACHE_DIRS_COMMAND_H_
