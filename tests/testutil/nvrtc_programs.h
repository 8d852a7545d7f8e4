// The programs of tests/nvrtc/ (nvrtc_program.c, built beside the tests that run them) and the
// include directories their `includes` mode compiles against: for the NVRTC stand-in's tests
// (nvrtc_standin_test, nvrtc_cache_test).
#ifndef KCACHE_TESTS_TESTUTIL_NVRTC_PROGRAMS_H_
#define KCACHE_TESTS_TESTUTIL_NVRTC_PROGRAMS_H_

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testutil/tree_paths.h"

namespace kcache::testing {

// The stand-in's KCACHE_LOG lines (client/nvrtc/nvrtc_standin.c, nvrtc_cache.cc), as they begin.
inline constexpr char kNvrtcForwarded[] = "kcache: nvrtc: nvrtcCompileProgram forwarded to ";
inline constexpr char kNvrtcServed[] = "kcache: nvrtc: nvrtcCompileProgram served by kcache: ";
inline constexpr char kNvrtcStored[] = "kcache: nvrtc: stored ";

// nvrtc_linked_program, nvrtc_dlopen_program or nvrtc12_dlopen_program, beside the running test.
inline std::string NvrtcProgram(const std::string& name) {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / name).string();
}

// The real NVRTC 12 the tests forward to: the NVRTC 12.9 wheel's (requirements/test.in), which
// scripts/install-deps.sh puts in the project's .venv.
inline std::string WheelNvrtc12() {
  return SourcePath(".venv/lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
}

// Makes `dir`/a (empty), `dir`/b/hdr.h (kValue = 3.0f) and `dir`/unrelated, for
// `nvrtc_program includes DIR`: hdr.h is looked for in a/ first, found in b/; another thread of
// the program reads unrelated meanwhile. Returns `dir`.
inline std::filesystem::path MakeIncludeDirs(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  std::ofstream(dir / "b/hdr.h") << "constexpr float kValue = 3.0f;\n";
  std::ofstream(dir / "unrelated") << "not NVRTC's\n";
  return dir;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_NVRTC_PROGRAMS_H_
