// Finding the real compilers behind kcache's launchers, and every tool file a compile runs:
// the parts of a command's identity that are not on its command line.
#ifndef KCACHE_ENGINE_KEYS_COMPILER_TOOLS_H_
#define KCACHE_ENGINE_KEYS_COMPILER_TOOLS_H_

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler_command.h"

namespace kcache::objects {

// The environment a launcher sees (name -> value).
using Environment = std::map<std::string, std::string>;
Environment CurrentEnvironment();

// Where to find compilers without finding kcache itself.
struct ToolLookup {
  Environment env;  // PATH, KCACHE_REAL_CUDA_HOME, CUDA_HOME, NVCC_CCBIN are read from it
  // The kcache binaries (realpaths: kcache and kcache-launch); never chosen as a compiler.
  std::vector<std::string> kcache_binaries;
  // Where what a gcc driver runs (DriverPrograms) is memoized; "" asks the driver every time.
  // KCACHE_STATE_DIR/driver-programs by default.
  std::string programs_memo;
  // Where compilers' option tables (NvccOptionTable) are memoized, one file per compiler
  // content digest; "" asks the compiler every time. KCACHE_STATE_DIR/compiler-options.
  std::string options_memo;

  bool IsKcache(const std::string& real_path) const {
    return std::find(kcache_binaries.begin(), kcache_binaries.end(), real_path) !=
           kcache_binaries.end();
  }
};

// The first executable `name` in PATH that is not kcache (a masquerade link to it is skipped,
// wherever it sits). An absolute or relative path with a '/' is taken as is, unless it is
// kcache: then its base name is looked up in PATH. NotFound naming PATH otherwise.
absl::StatusOr<std::string> FindCompiler(const std::string& name, const ToolLookup& lookup);

// The real nvcc: $KCACHE_REAL_CUDA_HOME/bin/nvcc (the toolkit a shim toolkit root in
// $CUDA_HOME mirrors: `kcache run`, client/cli/run_environment.h), $CUDA_HOME/bin/nvcc,
// /usr/local/cuda/bin/nvcc, then PATH; a link to kcache in any of them is skipped.
absl::StatusOr<std::string> FindNvcc(const ToolLookup& lookup);

// One file that takes part in a compile: a name for explain and its path.
struct ToolFile {
  std::string role;  // "nvcc", "cicc", "host compiler", ...
  std::string path;  // "" when the file is absent (keyed as absent)
};

// The programs a gcc driver runs for a compile and a link, by role: "cc1", "cc1plus", "as",
// "collect2", "linker" (ld), each the real path of what `-print-prog-name=NAME` names (a bare
// name found in PATH), or "" when there is none. Asking the driver takes a process each
// (~3 ms): the answers are memoized in lookup.programs_memo while the driver's stat, each
// directory it searches for programs (`-print-search-dirs`; a program added to one shows as
// its change) and PATH, GCC_EXEC_PREFIX and COMPILER_PATH are what they were; a bare name is
// looked up in PATH again each time.
absl::StatusOr<std::vector<ToolFile>> DriverPrograms(const std::string& compiler,
                                                     const ToolLookup& lookup);

// Every file the compile runs: for gcc, the compiler, and of DriverPrograms' the compiler
// proper (cc1 for C, else cc1plus) and as when it compiles, the linker and collect2 when it
// links (a link of objects only these); for nvcc, nvcc, nvcc.profile,
// cicc, ptxas, cudafe++, fatbinary, nvlink, libdevice and the host compiler (-ccbin, else
// NVCC_CCBIN, else gcc in PATH) with its cc1plus and as. The linker's role is "linker".
absl::StatusOr<std::vector<ToolFile>> ToolFiles(const CompilerCommand& command,
                                                const std::string& compiler,
                                                const ToolLookup& lookup);

// The environment variables that change what a compile of `family` produces (their values,
// or their absence, are keyed): NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS, CPATH, ...
const std::vector<std::string>& KeyedEnvironment(CompilerFamily family);

// What a link reads besides its arguments: LIBRARY_PATH, LD_RUN_PATH, LD_LIBRARY_PATH,
// GNUTARGET, LDEMULATION, COLLECT_NO_DEMANGLE (keyed for shared objects only).
const std::vector<std::string>& KeyedLinkEnvironment();

// What the compiler expands `native_args` (-march=native, ...) to on this machine: the
// driver's `-###` lines for an empty compile with them, which name the CPU model and each
// feature. Keyed, so a pod on another CPU misses.
absl::StatusOr<std::string> NativeExpansion(const std::string& compiler,
                                            const std::vector<std::string>& native_args);

// What `nvcc --help` says of the options of the nvcc at `nvcc`, whose content digest is
// `digest_hex` (ParseNvccHelp): read from lookup.options_memo when that nvcc was asked before,
// else asked (~30 ms) and memoized there. FailedPrecondition when nvcc prints no table.
absl::StatusOr<CompilerOptionTable> NvccOptionTable(const std::string& nvcc,
                                                    const std::string& digest_hex,
                                                    const ToolLookup& lookup);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_COMPILER_TOOLS_H_
