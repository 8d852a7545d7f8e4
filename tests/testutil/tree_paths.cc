#include "tests/testutil/tree_paths.h"

namespace kcache::testing {
namespace {

std::string Join(std::string_view root, std::string_view relative) {
  std::string path(root);
  if (!relative.empty()) path.append("/").append(relative);
  return path;
}

}  // namespace

std::string SourcePath(std::string_view relative) { return Join(KCACHE_SOURCE_DIR, relative); }

std::string BinaryPath(std::string_view relative) { return Join(KCACHE_BINARY_DIR, relative); }

}  // namespace kcache::testing
