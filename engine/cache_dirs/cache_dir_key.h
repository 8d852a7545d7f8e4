// The key of a cache directory's snapshot: what decides its files' bytes that the library's own
// key misses (docs/cache-dirs.md, "The key"). A snapshot is served only to a process whose key
// is the same; the components are kept with it, so that a miss can say which one differs.
#ifndef KCACHE_ENGINE_CACHE_DIRS_CACHE_DIR_KEY_H_
#define KCACHE_ENGINE_CACHE_DIRS_CACHE_DIR_KEY_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/cache_dirs/cache_dir_table.h"

namespace kcache::cache_dirs {

// What the process around the directory is: everything a key may take.
struct CacheDirContext {
  // Installed distributions' versions by normalized name (installed_versions.h): the library's
  // and torch's are read from it.
  std::map<std::string, std::string> versions;
  // The SMs of the GPUs the process is given, or the --arch a capture declares ("8.6", "9.0a").
  std::vector<std::string> sms;
  std::string toolkit;  // the CUDA toolkit it compiles with ("13.0.88"); "" none
  std::string driver;   // cuDriverGetVersion ("13000"); "" none (an image's build)
  Environment env;
  std::vector<std::string> command_line;  // the command's arguments, argv[0] first
};

// The variables that change what nvcc builds, which no library keys: in every key.
inline constexpr const char* kAlwaysKeyedVariables[] = {"NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"};

struct CacheDirKey {
  // NAME -> VALUE, in a fixed order: "library", "version", "sms", then the key parts the row
  // takes ("toolkit", "torch", "driver", "command_line", "path"), then "env NAME" for each
  // variable keyed. A value "" is absent (no version installed, no driver).
  std::vector<std::pair<std::string, std::string>> components;
  std::string digest;  // 64 hex digits: SHA-256 of the components, each length-prefixed

  // The first component that differs from `other`'s ("sms", "env VLLM_USE_V2"), or "" when the
  // two are the same; for a report of why a directory was not served.
  std::string FirstDifference(const CacheDirKey& other) const;
};

// The key of `spec`'s directory at `dir` (ResolveCacheDir's) in `context`. Variables keyed:
// those with one of the row's prefixes, and kAlwaysKeyedVariables, but never the row's own
// `variables` (where the directory is: keyed by "path" where the files name it).
CacheDirKey KeyFor(const CacheDirSpec& spec, const std::string& dir,
                   const CacheDirContext& context);

// A key's digest: SHA-256 over its components, each name and value framed as u32le(byte
// length) + bytes (CacheDirKey::digest).
std::string CacheDirKeyDigest(const std::vector<std::pair<std::string, std::string>>& components);

// The CUDA toolkit at `root` as a key names it: its CUDA_VERSION (include/cuda.h, "13.0") and
// the SHA-256 of its nvcc and ptxas ("13.0 nvcc 1a2b3c4d5e6f ptxas 0f9e8d7c6b5a"), so that two
// builds of one release differ; "" when `root` has no nvcc.
std::string ToolkitIdentity(const std::string& root);

// The version of the first of `spec`'s distributions installed, "" when none is.
std::string LibraryVersion(const CacheDirSpec& spec, const CacheDirContext& context);

}  // namespace kcache::cache_dirs

#endif  // KCACHE_ENGINE_CACHE_DIRS_CACHE_DIR_KEY_H_
