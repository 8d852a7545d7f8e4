// The functions a shared library exports, read from its ELF dynamic symbol table without
// loading it: what `kcache run` compares between the node's CUDA driver and kcache's driver
// stand-in before it preloads the stand-in (stand_in_env.h RouteCuda).
#ifndef KCACHE_CLIENT_CLI_ELF_FUNCTIONS_H_
#define KCACHE_CLIENT_CLI_ELF_FUNCTIONS_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace kcache::cli {

// The names of the functions `path` defines in its dynamic symbol table (global or weak,
// STT_FUNC or STT_GNU_IFUNC, not undefined), each once. FailedPrecondition naming the file when
// it cannot be read or is not a 64-bit little-endian ELF file with a dynamic symbol table whose
// headers and tables lie inside it.
absl::StatusOr<std::set<std::string>> DynamicFunctions(const std::string& path);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_ELF_FUNCTIONS_H_
