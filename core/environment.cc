#include "core/environment.h"

#include <cstdlib>

namespace kcache {

std::string EnvValue(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace kcache
