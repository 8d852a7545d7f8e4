// Reading the process's environment: the one place kcache's C++ reads variables through (the
// plain-C stand-ins and the preload read environ themselves).
#ifndef KCACHE_CORE_ENVIRONMENT_H_
#define KCACHE_CORE_ENVIRONMENT_H_

#include <optional>
#include <string>

namespace kcache {

// The value of environment variable `name`, "" when it is unset (unset and set empty read
// alike: no kcache variable means anything when empty). Reads the environment as it is now.
std::string EnvValue(const char* name);

// The value of `name`, or nullopt when it is unset: for the few variables whose absence says
// something of its own (CUDA_VISIBLE_DEVICES unset shows every GPU, set empty none; a record
// handed across an exec; a default named in a message).
std::optional<std::string> EnvIfSet(const char* name);

}  // namespace kcache

#endif  // KCACHE_CORE_ENVIRONMENT_H_
