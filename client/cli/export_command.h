// `kcache export --server ADDR --to-store DIR [--namespace NS ...]`: copies a running kcached's
// client-made objects (the launchers' objects, the Redis door's values) into a store directory
// the next image bakes (engine/objects/object_export.h; docs/torch-compile.md).
#ifndef KCACHE_CLIENT_CLI_EXPORT_COMMAND_H_
#define KCACHE_CLIENT_CLI_EXPORT_COMMAND_H_

#include <CLI/CLI.hpp>

namespace kcache::cli {

void RegisterExportCommand(CLI::App& app, int* exit_code);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_EXPORT_COMMAND_H_
