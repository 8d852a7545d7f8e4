// The compiler launchers' command line, shared by `kcache` and the small `kcache-launch` that
// the masquerade links (nvcc, c++, cc, ...) point at: which compiler and arguments a launcher
// invocation names, the options its environment sets (KCACHE_BASEDIR, KCACHE_STATE_DIR,
// KCACHE_LOG, KCACHE_MAX_OBJECT_BYTES; docs/torch-extensions.md), and the pass-through of a
// compile's own steps. It opens no cache: each binary adds the ones it can reach (and their
// time for kcached: cache_budget.h).
#ifndef KCACHE_CLIENT_LAUNCH_LAUNCH_COMMAND_H_
#define KCACHE_CLIENT_LAUNCH_LAUNCH_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler_command.h"
#include "engine/launcher/launcher.h"

namespace kcache::launch {

// The names a masquerade link may have.
inline constexpr const char* kCompilerNames[] = {"nvcc", "c++", "g++", "cc", "gcc"};
// Set while a launcher runs the real compiler: nvcc's own host-compiler steps (through a
// masquerade -ccbin) then pass straight through instead of being cached one by one.
inline constexpr char kInsideCompileEnv[] = "KCACHE_INSIDE_COMPILE";
// The launcher that serves hits without gRPC or RocksDB (client/launch/launch_main.cc); it
// lives beside `kcache` and hands everything else to it.
inline constexpr char kLaunchBinary[] = "kcache-launch";

bool IsCompilerName(const std::string& name);

// True when argv is a launcher's: argv[0] a compiler name (a masquerade link), or
// `kcache -- COMPILER ARGS`, `kcache nvcc ARGS`, `kcache /usr/bin/c++ ARGS` (CMake's
// *_COMPILER_LAUNCHER puts the compiler's path first).
bool IsLauncherInvocation(int argc, char** argv);

struct LaunchCommand {
  std::string compiler;  // a name or a path
  std::vector<std::string> args;
};
// InvalidArgument for `kcache --` without a compiler.
absl::StatusOr<LaunchCommand> ParseLaunchCommand(int argc, char** argv);

// $KCACHE_STATE_DIR, else ~/.cache/kcache ("" without HOME).
std::string StateDir();
// This process's binary (realpath), and the directory kcache's binaries are in.
std::string SelfExe();

// The options the environment sets, without a cache.
objects::LauncherOptions LauncherOptionsFromEnvironment();

// When this process runs inside a compile a launcher already runs (nvcc's host-compiler steps
// through a masquerade -ccbin), execs the real compiler and does not return (127 and a message
// when it cannot); nullopt otherwise, after marking the environment so that such steps pass
// through. Call before running the launcher.
std::optional<int> PassThroughInsideACompile(const objects::LauncherOptions& options,
                                             const LaunchCommand& command);
// Runs the real compiler with the command's arguments in place of this process: a command
// compiled uncached without a look at any cache. Returns only when it cannot (127, and a
// message on stderr).
int ExecRealCompiler(const objects::LauncherOptions& options, const LaunchCommand& command);
// Takes the mark back (before handing the command to another launcher binary).
void ClearInsideMark();

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_LAUNCH_COMMAND_H_
