// What a cache directory's key takes (engine/cache_dirs/cache_dir_key.h) for a process of one
// environment, and the directories it has: one rule for `kcache cache-dirs`, which shows the
// keys, and `kcache run`, which serves and captures by them (docs/cache-dirs.md).
#ifndef KCACHE_CLIENT_CLI_CACHE_DIR_CONTEXT_H_
#define KCACHE_CLIENT_CLI_CACHE_DIR_CONTEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/cache_dirs/cache_dir_key.h"
#include "engine/cache_dirs/cache_dir_table.h"
#include "engine/keys/compiler_tools.h"

namespace kcache::cli {

struct KeyContext {
  cache_dirs::CacheDirContext context;
  std::string sms_from;  // where the SMs came from, in words ("the GPUs seen", "--arch")
};

// The context for a process of `lookup`'s environment: its installed versions (PATH's python3),
// the toolkit it would compile with without kcache (RealToolkitRoot: under `kcache run`, the
// real one behind the shim), the driver's version, and the SMs: those of the GPUs seen, or,
// where none is seen (an image's build), those `arch` declares ("8.6,9.0a"). A GPU seen is never
// overridden by `arch`: a key names the GPUs that run the files. InvalidArgument for an `arch`
// that does not parse or a toolkit RealToolkitRoot refuses.
absl::StatusOr<KeyContext> KeyContextFor(const objects::ToolLookup& lookup, absl::string_view arch);

// The table's rows, then one per `--cache-dir NAME=DIR[:PREFIX,...]` flag. InvalidArgument (the
// flag's) for one that does not parse; Internal when the built-in table does not (a build defect).
absl::StatusOr<std::vector<cache_dirs::CacheDirSpec>> CacheDirSpecs(
    const std::vector<std::string>& user_dirs);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_CACHE_DIR_CONTEXT_H_
