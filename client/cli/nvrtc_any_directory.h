// For `kcache nvrtc-put` (docs/nvrtc-standin.md, "Programs named in a directory"): whether an
// NVRTC compile whose program is named in a directory (CuPy names each in a new temporary one)
// gives the same output in any directory, found by compiling it again in a new one with the
// same NVRTC; if it does, its entry moves to the key for any directory
// (engine/objects/nvrtc_compile.h NvrtcAnyDirectoryKey), which the next process's stand-in
// looks under first.
#ifndef KCACHE_CLIENT_CLI_NVRTC_ANY_DIRECTORY_H_
#define KCACHE_CLIENT_CLI_NVRTC_ANY_DIRECTORY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/object_entry.h"
#include "engine/objects/nvrtc_compile.h"

namespace kcache::cli {

// NVRTC's outcome for `program` compiled by the NVRTC at `context.library` (dlopen'd into this
// process) in context.cwd, its name moved to a new directory under $TMPDIR (or /tmp) in
// `state` (made, and removed after). FailedPrecondition when the library or the directory
// cannot be had.
absl::StatusOr<objects::NvrtcOutcome> CompileInAnotherDirectory(
    const objects::NvrtcProgram& program, const objects::NvrtcContext& context,
    const objects::NvrtcNameDirectory& name, objects::NvrtcDirectoryState state);

// `entry` (its bundle: `bundle`), the compile of `program` in `context`, moved to the key for
// any directory: its manifest made relative to the program's directory
// (objects::NvrtcAnyDirectoryManifest). FailedPrecondition saying why it stays under its name:
// the name has no directory; the compile looked at other files there; an output or a lowered
// name holds the directory; compiled in another directory, NVRTC gave another outcome (what the
// output holds of the directory is then not plain text: a PTX string's bytes, LTO-IR).
absl::StatusOr<ObjectEntry> AnyDirectoryEntry(const ObjectEntry& entry, absl::string_view bundle,
                                              const objects::NvrtcProgram& program,
                                              const objects::NvrtcContext& context);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_NVRTC_ANY_DIRECTORY_H_
