// Base directories: the directories whose paths keys, manifests, dependency files and replayed
// output write relative to them ("@cwd@", "@base1@", ...), so that one checkout's entries
// serve another's.
#ifndef KCACHE_ENGINE_KEYS_BASE_DIRS_H_
#define KCACHE_ENGINE_KEYS_BASE_DIRS_H_

#include <string>
#include <vector>

namespace kcache::objects {

// The variable `kcache run` names its shims directory in (client/cli/run_environment.h): the
// masquerade links and the shim toolkit roots that $CUDA_HOME and $PATH lead into. Its path
// is the state directory's, so it depends on the user, HOME and KCACHE_STATE_DIR; what is in it
// does not (links named after the compilers, and per real toolkit root a mirror of it).
inline constexpr char kShimsDirVariable[] = "KCACHE_SHIMS_DIR";

// Directories whose paths are written relative to them in keys, manifests, dependency files
// and replayed output: the command's working directory first, then the configured ones
// (KCACHE_BASEDIR, colon-separated), and kcache's shims directory. Each is an absolute,
// normalized path. Sound as every token is restored to this machine's directory before
// anything is checked: a manifest's paths are read where they lead here.
struct BaseDirs {
  std::string cwd;
  std::vector<std::string> roots;
  // $KCACHE_SHIMS_DIR ("" when unset), written "@shims@": an image's entries, compiled under
  // one user's state directory, serve a pod of another user, HOME or state directory.
  std::string shims;

  // Replaces each base directory at the start of a path component with its token ("@cwd@",
  // "@base1@", ...). Longest directory first.
  std::string Normalize(const std::string& text) const;
  // The reverse, with this machine's directories.
  std::string Restore(const std::string& text) const;
  // `path` (normalized or not) as an absolute path on this machine: restored, and a relative
  // one taken against cwd.
  std::string Resolve(const std::string& path) const;
};

// `dir` as BaseDirs holds it: absolute and lexically normal, no trailing slash; "" when `dir`
// is empty or relative.
std::string NormalBaseDir(const std::string& dir);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_BASE_DIRS_H_
