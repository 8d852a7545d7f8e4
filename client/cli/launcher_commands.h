// The compiler launchers on the command line: `kcache nvcc|c++|cc ARGS`, `kcache -- COMPILER
// ARGS`, `kcache /path/to/compiler ARGS` (CMake's *_COMPILER_LAUNCHER), masquerade links named
// nvcc, c++, g++, cc, gcc; and
// `kcache run`, `kcache env` (their environment: run_environment.h; `run --check`:
// run_check.h) and `kcache explain` (docs/torch-extensions.md, docs/jit-libraries.md).
//
// Launchers take their settings from the environment `kcache run` / `kcache env` set:
// KCACHE_STORE (a store directory) or KCACHE_SERVER (a kcached address), KCACHE_BASEDIR
// (colon-separated base directories), KCACHE_STATE_DIR (the digest memo; default
// ~/.cache/kcache), KCACHE_MAX_OBJECT_BYTES, KCACHE_LOG=1 (a line per command on stderr).
#ifndef KCACHE_CLIENT_CLI_LAUNCHER_COMMANDS_H_
#define KCACHE_CLIENT_CLI_LAUNCHER_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kcache::cli {

// True when argv asks for a launcher (argv[0] a compiler name, or argv[1] one of nvcc, c++,
// cc, g++, gcc, "--", or a path with a '/': CMake's launcher form); RunLauncherCli runs it.
bool IsLauncherInvocation(int argc, char** argv);
int RunLauncherCli(int argc, char** argv);

// run, env, explain.
void RegisterLauncherCommands(CLI::App& app, int* exit_code);

// argv[1..] in the order CLI11's App::parse(std::vector<std::string>) takes them (last first),
// with a `--redis` that no address follows (the end, `--` or another option) given as the flag
// that asks kcached for its door: an optional value would make CLI11 take that `--` as the
// value's end, and `kcache run --redis -- python -c ...` would read `-c` as kcache's own.
std::vector<std::string> ArgsForParse(int argc, char** argv);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_LAUNCHER_COMMANDS_H_
