// `kcache cuda-build-ptx --device X.Y`: asks kcached to build, for the next load, the SASS for
// that GPU from the PTX module on standard input (kcache.v1.KernelCache.BuildFromPtx;
// docs/ptx-libraries.md, "Built for the next pod"). libkcache-cuda.so runs it when a load found
// no SASS; not shown in the help.
#ifndef KCACHE_CLIENT_CLI_PTX_BUILD_COMMAND_H_
#define KCACHE_CLIENT_CLI_PTX_BUILD_COMMAND_H_

#include <CLI/CLI.hpp>

namespace kcache::cli {

void RegisterPtxBuildCommand(CLI::App& app, int* exit_code);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_PTX_BUILD_COMMAND_H_
