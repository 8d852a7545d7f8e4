// Base directories: the directories whose paths keys, manifests, dependency files and replayed
// output write relative to them ("@cwd@", "@base1@", ...), so that one checkout's entries
// serve another's.
#ifndef KCACHE_ENGINE_OBJECTS_BASE_DIRS_H_
#define KCACHE_ENGINE_OBJECTS_BASE_DIRS_H_

#include <string>
#include <vector>

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
  // `path` (normalized or not) as an absolute path on this machine: restored, and a relative
  // one taken against cwd.
  std::string Resolve(const std::string& path) const;
};

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_BASE_DIRS_H_
