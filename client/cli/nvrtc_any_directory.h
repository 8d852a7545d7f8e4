// For `kcache nvrtc-put` (docs/nvrtc-standin.md, "Programs named in a directory"): whether an
// NVRTC compile whose program is named in a directory (CuPy names each in a new temporary one)
// gives the same output in any directory: nothing it read can expand a macro holding its name
// (objects::kNvrtcPathMacros, engine/keys/macro_reach.h), and compiled again in directories
// of kcache's choosing by the same NVRTC it gives the same outcome; if so, its entry moves to
// the key for any directory
// (engine/nvrtc/nvrtc_compile.h NvrtcAnyDirectoryKey), which the next process's stand-in
// looks under first.
#ifndef KCACHE_CLIENT_CLI_NVRTC_ANY_DIRECTORY_H_
#define KCACHE_CLIENT_CLI_NVRTC_ANY_DIRECTORY_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/object_entry.h"
#include "engine/nvrtc/nvrtc_compile.h"

namespace kcache::cli {

// `entry` (its outcome: `outcome`), the compile of `program` in `context`, moved to the key for
// any directory: its manifest made relative to the program's directory
// (objects::NvrtcAnyDirectoryManifest). FailedPrecondition saying why it stays under its name:
// the name has no directory; the compile looked at other files there; an output or a lowered
// name holds the directory; a text it read spells __FILE__, __BASE_FILE__ or assert, or holds
// the pieces to paste one; compiled in a directory shorter and in one longer than its own, under
// /tmp (not the caller's $TMPDIR), NVRTC gave another outcome (what the output holds of the
// directory is then not plain text: LTO-IR).
absl::StatusOr<ObjectEntry> AnyDirectoryEntry(const ObjectEntry& entry,
                                              const objects::NvrtcOutcome& outcome,
                                              const objects::NvrtcProgram& program,
                                              const objects::NvrtcContext& context);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_NVRTC_ANY_DIRECTORY_H_
