// The masquerade links and the shim CUDA toolkit root that `kcache run` and `kcache env` route
// a build's compilers through (client/cli/run_environment.h, docs/torch-extensions.md), and
// the lookups of programs that routing and `kcache run --check` share.
//
// Every function here is safe to run from several processes at once for the same directory:
// each link is made under a temporary name and renamed into place, and two runs for the same
// arguments make the same links.
#ifndef KCACHE_CLIENT_CLI_COMPILER_SHIMS_H_
#define KCACHE_CLIENT_CLI_COMPILER_SHIMS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/keys/compiler_tools.h"

namespace kcache::cli {

// The binary the masquerade links point at: kcache-launch beside this binary, else this one.
std::string LauncherBinary();

// `name`'s value in `env` ("" when unset).
std::string Variable(const objects::Environment& env, const std::string& name);

// The file `program` (a path, or a name looked up in lookup.env's PATH as a shell would, links
// to kcache included) names; "" when there is none.
std::string FindProgram(const std::string& program, const objects::ToolLookup& lookup);
// Whether `program` names kcache or kcache-launch (through any link).
bool NamesKcache(const std::string& program, const objects::ToolLookup& lookup);
// Whether `a` and `b` are the same file (false when either is absent).
bool SameFile(const std::string& a, const std::string& b);

// Creates `dir` when absent and in it a link named each of `names` to `launcher`, replacing
// whatever had that name. FailedPrecondition naming the path it could not create.
absl::Status MakeShims(const std::string& dir, const std::vector<std::string>& names,
                       const std::string& launcher);

// The shim toolkit root for the toolkit at `real_root` (which holds bin/nvcc):
// `<shims>/cuda-<the first 12 hex digits of real_root's SHA-256>`. Its entries are links to
// real_root's (include/, lib64/, nvvm/, version.json, ...), except bin/: a directory of links
// to real_root/bin's entries, except nvcc, a link to `launcher`. A launcher reached through it
// runs $KCACHE_REAL_CUDA_HOME/bin/nvcc (engine/keys/compiler_tools.h, FindNvcc), so the
// real nvcc runs from its own directory and finds its nvcc.profile, cicc and ptxas there.
// Entries real_root no longer has are removed; each call refreshes the rest. Returns the
// shim root; FailedPrecondition naming what could not be read or made.
absl::StatusOr<std::string> MakeShimToolkit(const std::string& shims, const std::string& real_root,
                                            const std::string& launcher);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_COMPILER_SHIMS_H_
