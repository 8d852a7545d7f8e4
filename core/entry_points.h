// The kernel entry points an artifact defines, read from its bytes without a driver: what a
// loader looks up at load so that a kernel that cannot run fails there, not at first launch.
#ifndef KCACHE_CORE_ENTRY_POINTS_H_
#define KCACHE_CORE_ENTRY_POINTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"

namespace kcache {

// The names of the `.entry` directives of PTX text (".visible .entry softmax(" -> "softmax"),
// in order; comments (// and /* */) are skipped. Never fails: text without entries gives none.
std::vector<std::string> PtxEntryNames(absl::string_view ptx);

// The entry points of an artifact: CubinEntryNames (core/cubin.h) for a cubin, PtxEntryNames
// for PTX. InvalidArgument for LTO-IR (nothing loads it unlinked) and for a cubin that does not
// parse.
absl::StatusOr<std::vector<std::string>> EntryPointsOf(ArtifactKind kind, absl::string_view bytes);

}  // namespace kcache

#endif  // KCACHE_CORE_ENTRY_POINTS_H_
