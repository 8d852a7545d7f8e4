// The key of a compile's outputs, ccache "direct mode" style, in two levels:
//   key1 = SHA-256 over tagged fields: the compiler family, the keyed arguments (paths under
//          the base directories written relative to them), the content digest of every tool
//          the compile runs, the environment that changes output, the source's digest (and
//          the working directory when the output holds debug paths);
//   under key1, entries, each with a manifest: every header the compiler read (from its own
//          dependency output) and its digest. An entry is a hit only when every header on
//          this machine has the recorded digest.
// The compiler's preprocessed output is never keyed: nvcc preprocesses once per
// __CUDA_ARCH__, and one pass does not show what the others read.
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_KEY_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_KEY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/compiler_command.h"
#include "core/kernel_spec.h"
#include "engine/objects/compiler_tools.h"
#include "engine/objects/file_digests.h"

namespace kcache::objects {

// Directories whose paths are written relative to them in keys, manifests, dependency files
// and replayed output: the command's working directory first, then the configured ones
// (KCACHE_BASEDIR, colon-separated). Each is an absolute, normalized path.
struct BaseDirs {
  std::string cwd;
  std::vector<std::string> roots;

  // Replaces each base directory at the start of a path component with its token ("@cwd@",
  // "@base1@", ...). Longest directory first.
  std::string Normalize(const std::string& text) const;
  // The reverse, with this machine's directories.
  std::string Restore(const std::string& text) const;
};

// One field of key1, kept (as text) with each entry so `kcache explain` can say which
// differs: ("arg", "-O3"), ("tool nvcc", digest), ("env CPATH", value), ("source", digest).
using KeyField = std::pair<std::string, std::string>;

struct ObjectKey {
  KernelId key1;
  std::vector<KeyField> fields;
  std::string source;  // normalized source path, for listings and explain
};

// Computes key1. FailedPrecondition (with UncachedReason kUnreadableInput or kTimeMacros in
// *reason) when a tool or the source cannot be read or the source names a time macro.
// `native_expansion`: what the command's -march=native (...) means on this machine
// (NativeExpansion); "" when it has none. A shared object also keys its kind and the link's
// environment (KeyedLinkEnvironment).
absl::StatusOr<ObjectKey> ComputeObjectKey(const CompilerCommand& command,
                                           const std::vector<ToolFile>& tools,
                                           const Environment& env, const BaseDirs& dirs,
                                           FileDigests& digests, UncachedReason* reason,
                                           const std::string& native_expansion = "");

// A manifest: (normalized header path, digest), in the compiler's order.
using Manifest = std::vector<std::pair<std::string, std::string>>;

// A make-style dependency file: its targets and its prerequisites, unescaped.
struct DepFile {
  std::vector<std::string> targets;
  std::vector<std::string> deps;
};
DepFile ParseDepFile(const std::string& text);
std::string WriteDepFile(const DepFile& deps);

// The manifest of the headers in `deps` (the source and relative paths resolved against
// dirs.cwd). FailedPrecondition when one cannot be read or names a time macro (*reason), or
// (kInputChanged) changed at or after `compiled_from`, when the compiler may have read
// another content than the one recorded (a second earlier where the file system keeps
// whole seconds). `compiled_from`: the coarse real-time clock (the one file times come from)
// read before the compiler started.
absl::StatusOr<Manifest> MakeManifest(const DepFile& deps, const BaseDirs& dirs,
                                      FileDigests& digests, UncachedReason* reason,
                                      absl::Time compiled_from = absl::InfiniteFuture());

// The same for files the compiler read that are not C or C++ text (a precompiled header; the
// linker's objects and libraries, DigestKind::kLinkInput): no time-macro rule, whose bytes may
// hold those names.
absl::StatusOr<Manifest> MakeInputManifest(const std::vector<std::string>& paths,
                                           const BaseDirs& dirs, FileDigests& digests,
                                           UncachedReason* reason, absl::Time compiled_from,
                                           DigestKind kind);

// Whether every line of `manifest` holds here: each file has its digest, each other fact of a
// path (file_digests.h: absent, a type, a link's target, ...) is still true, and each "$NAME"
// line (an environment variable the compile read) is what EnvironmentFact says of `env` now.
// On false, *first_difference names the first that does not ("header <path> changed",
// "linker input <path> is missing", "<path> exists now", "environment NAME differs: ...").
bool ManifestMatches(const Manifest& manifest, const BaseDirs& dirs, const Environment& env,
                     FileDigests& digests, std::string* first_difference);

// A manifest's "$NAME" line value for the variable as `env` has it: "=VALUE" (base directories
// normalized) or "(unset)"; for PWD what a compiler makes of it (it uses it only when it names
// the working directory): its value then, else "(not the working directory)".
std::string EnvironmentFact(const std::string& name, const Environment& env, const BaseDirs& dirs);

// The id of an entry under key1: SHA-256 of its manifest, in hex.
std::string ManifestId(const Manifest& manifest);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_KEY_H_
