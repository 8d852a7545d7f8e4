// A cacheable compiler command with everything its key needs: what the launcher and
// `kcache explain` both start from. Internal to engine/launcher.
#ifndef KCACHE_ENGINE_LAUNCHER_PREPARED_COMMAND_H_
#define KCACHE_ENGINE_LAUNCHER_PREPARED_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler_command.h"
#include "engine/keys/command_key.h"
#include "engine/keys/file_digests.h"
#include "engine/launcher/launcher.h"

namespace kcache::objects {

struct Prepared {
  CompilerCommand command;
  std::string compiler_path;    // the real compiler
  std::vector<ToolFile> tools;  // keyed by content; the linker's role is "linker"
  BaseDirs dirs;
  ObjectKey key;
};

// The real compiler behind `compiler` (a name or path; "nvcc" or "" for nvcc's family finds
// nvcc in CUDA_HOME first), never kcache itself.
absl::StatusOr<std::string> RealCompiler(const LauncherOptions& options, CompilerFamily family,
                                         const std::string& compiler);

// Parses `args` and computes the key. On failure, *reason says why the command is not cached
// and the status's message names the argument or file that decided it.
absl::StatusOr<Prepared> Prepare(const LauncherOptions& options, CompilerFamily family,
                                 const std::string& compiler_path,
                                 const std::vector<std::string>& args, FileDigests& digests,
                                 UncachedReason* reason);

// The same from what kcache-launch made of this command (LauncherOptions::handed): the command
// parsed again (that is cheap), the real compiler, tools and key taken as handed.
absl::StatusOr<Prepared> PrepareHanded(const LauncherOptions& options, CompilerFamily family,
                                       const std::vector<std::string>& args,
                                       const HandedMiss& handed, FileDigests& digests,
                                       UncachedReason* reason);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_LAUNCHER_PREPARED_COMMAND_H_
