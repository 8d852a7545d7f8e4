// Reading the process's environment: the one helper the tools and the stand-ins' cache halves
// read variables through.
#ifndef KCACHE_CORE_ENVIRONMENT_H_
#define KCACHE_CORE_ENVIRONMENT_H_

#include <string>

namespace kcache {

// The value of environment variable `name`, "" when it is unset (unset and set empty read
// alike: no kcache variable means anything when empty). Reads the environment as it is now.
std::string EnvValue(const char* name);

}  // namespace kcache

#endif  // KCACHE_CORE_ENVIRONMENT_H_
