// cache_dirs.yaml's text, built in (CMakeLists.txt writes its definition from the file).
#ifndef KCACHE_ENGINE_CACHE_DIRS_CACHE_DIRS_YAML_H_
#define KCACHE_ENGINE_CACHE_DIRS_CACHE_DIRS_YAML_H_

namespace kcache::cache_dirs {

extern const char kCacheDirsYaml[];

}  // namespace kcache::cache_dirs

#endif  // KCACHE_ENGINE_CACHE_DIRS_CACHE_DIRS_YAML_H_
