// The precompiled headers a gcc-family compile may read in place of a header. GCC reads
// x.h.gch (clang also x.h.pch) found beside where it searches for an included x.h, and names
// it nowhere in its dependency output: neither the .gch nor the headers it was built from.
// The launcher keys every such file by content (its bytes also hold the flags it was built
// with). Internal to engine/objects.
#ifndef KCACHE_ENGINE_OBJECTS_PRECOMPILED_HEADERS_H_
#define KCACHE_ENGINE_OBJECTS_PRECOMPILED_HEADERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler_command.h"
#include "engine/objects/compiler_tools.h"

namespace kcache::objects {

// Every x.gch and x.pch that exists for a name x the compile includes: the names of the
// source's #include lines and of -include options, looked for in the source's directory,
// each -I, -iquote, -isystem and -idirafter directory, CPATH, C_INCLUDE_PATH and
// CPLUS_INCLUDE_PATH, and the compiler's own include directories (`-E -v`). This is more
// than the compiler reads (only the first include can be precompiled), never less. Relative
// paths are against `cwd`. FailedPrecondition when one is a directory of precompiled headers
// (x.gch/), whose choice among them cannot be seen.
absl::StatusOr<std::vector<std::string>> PrecompiledHeaders(const CompilerCommand& command,
                                                            const std::string& compiler,
                                                            const std::string& cwd,
                                                            const Environment& env);

// The names a source's #include lines give ("x.h" and <x.h> alike), in order.
std::vector<std::string> IncludedNames(const std::string& source_text);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_PRECOMPILED_HEADERS_H_
