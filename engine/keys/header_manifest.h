// Header manifests (core/object_entry.h HeaderManifest): making one from what a compile read,
// and checking that one still holds on this machine before its entry is served.
#ifndef KCACHE_ENGINE_KEYS_HEADER_MANIFEST_H_
#define KCACHE_ENGINE_KEYS_HEADER_MANIFEST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/compiler_command.h"
#include "core/object_entry.h"
#include "engine/keys/base_dirs.h"
#include "engine/keys/compiler_tools.h"
#include "engine/keys/dep_file.h"
#include "engine/keys/file_digests.h"

namespace kcache::objects {

// The manifest of the headers in `deps` (the source and relative paths resolved against
// dirs.cwd). FailedPrecondition when one cannot be read or names a time macro (*reason), or
// (kInputChanged) changed at or after `compiled_from`, when the compiler may have read
// another content than the one recorded (a second earlier where the file system keeps
// whole seconds). `compiled_from`: the coarse real-time clock (the one file times come from)
// read before the compiler started.
absl::StatusOr<HeaderManifest> MakeManifest(const DepFile& deps, const BaseDirs& dirs,
                                            FileDigests& digests, UncachedReason* reason,
                                            absl::Time compiled_from = absl::InfiniteFuture());

// The same for files the compiler read that are not C or C++ text (a precompiled header; the
// linker's objects and libraries, DigestKind::kLinkInput): no time-macro rule, whose bytes may
// hold those names.
absl::StatusOr<HeaderManifest> MakeInputManifest(const std::vector<std::string>& paths,
                                                 const BaseDirs& dirs, FileDigests& digests,
                                                 UncachedReason* reason, absl::Time compiled_from,
                                                 DigestKind kind);

// Whether every line of `manifest` holds here: each file has its digest, each other fact of a
// path (file_digests.h: absent, a type, a link's target, ...) is still true, and each "$NAME"
// line (an environment variable the compile read) is what EnvironmentFact says of `env` now.
// On false, *first_difference names the first that does not ("header <path> changed",
// "linker input <path> is missing", "<path> exists now", "environment NAME differs: ...").
bool ManifestMatches(const HeaderManifest& manifest, const BaseDirs& dirs, const Environment& env,
                     FileDigests& digests, std::string* first_difference);

// A manifest's "$NAME" line value for the variable as `env` has it: "=VALUE" (base directories
// normalized) or "(unset)"; for PWD what a compiler makes of it (it uses it only when it names
// the working directory): its value then, else "(not the working directory)".
std::string EnvironmentFact(const std::string& name, const Environment& env, const BaseDirs& dirs);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_HEADER_MANIFEST_H_
