// The source and build trees this test or benchmark was built from: the files it reads
// (kernels/manifest.yaml, tests/testdata/, docs/) and the binaries it runs.
//
// The two paths are compiled into tree_paths.cc alone (tests/testutil/CMakeLists.txt), not into
// every test: a clone at another path then recompiles that one file, and ccache serves every
// test from what a clone elsewhere compiled (scripts/test.sh).
#ifndef KCACHE_TESTS_TESTUTIL_TREE_PATHS_H_
#define KCACHE_TESTS_TESTUTIL_TREE_PATHS_H_

#include <string>
#include <string_view>

namespace kcache::testing {

// `relative` under the source tree, "/"-joined: SourcePath("kernels/manifest.yaml").
// SourcePath("") is the tree's root.
std::string SourcePath(std::string_view relative);

// `relative` under the build tree: BinaryPath("daemon/kcached").
std::string BinaryPath(std::string_view relative);

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_TREE_PATHS_H_
