// kcache's version, from the project() line of the top CMakeLists.txt: the one place it is set.
#ifndef KCACHE_CORE_VERSION_H_
#define KCACHE_CORE_VERSION_H_

namespace kcache {

inline constexpr char kVersion[] = KCACHE_VERSION;  // "0.1.0"

}  // namespace kcache

#endif  // KCACHE_CORE_VERSION_H_
