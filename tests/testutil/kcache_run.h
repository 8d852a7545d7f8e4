// Running a script under `kcache run` in a test: a clean environment (none of the variables
// `kcache run` sets, whatever the test's own environment holds, unless the test names them),
// a private state and shims directory, a store, and KCACHE_LOG=1.
#ifndef KCACHE_TESTS_TESTUTIL_KCACHE_RUN_H_
#define KCACHE_TESTS_TESTUTIL_KCACHE_RUN_H_

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testutil/launcher.h"

namespace kcache::testing {

// Every variable `kcache run` may set or read to find a compiler (client/cli/run_environment.h).
inline constexpr const char* kRoutedVariables[] = {"KCACHE_STORE",
                                                   "KCACHE_SERVER",
                                                   "KCACHE_REAL_CUDA_HOME",
                                                   "CUDA_HOME",
                                                   "CUDA_PATH",
                                                   "CUDACXX",
                                                   "PYTORCH_NVCC",
                                                   "FLASHINFER_NVCC",
                                                   "DG_JIT_NVCC_COMPILER",
                                                   "CC",
                                                   "CXX",
                                                   "CMAKE_CUDA_COMPILER_LAUNCHER",
                                                   "CMAKE_CXX_COMPILER_LAUNCHER",
                                                   "CMAKE_C_COMPILER_LAUNCHER",
                                                   "FLASHINFER_NVCC_LAUNCHER",
                                                   "FLASHINFER_CXX_LAUNCHER",
                                                   "TORCH_CUDA_ARCH_LIST",
                                                   "FLASHINFER_CUDA_ARCH_LIST",
                                                   "KCACHE_BASEDIR",
                                                   "KCACHE_REAL_NVRTC",
                                                   "KCACHE_REAL_NVRTC_12",
                                                   "KCACHE_REAL_LIBCUDA",
                                                   "LD_PRELOAD"};

// `env` arguments that unset them all.
inline std::string UnsetRoutedVariables() {
  std::string unset;
  for (const char* name : kRoutedVariables) absl::StrAppend(&unset, "-u ", name, " ");
  return unset;
}

// Runs `script` (written to tmp/<build>.sh) with sh in tmp/<build> (created) under
// `kcache run --store tmp/store --shims tmp/shims [flags]`, with `assignments` ("NAME=VALUE
// ...", e.g. CUDA_HOME=... or PATH=...:$PATH, expanded by the shell) set before it.
inline RunResult RunUnderKcache(const TempDir& tmp, const std::string& build,
                                const std::string& script, const std::string& assignments = "",
                                const std::string& flags = "") {
  std::filesystem::create_directories(tmp / build);
  std::string file = tmp.Write(absl::StrCat(build, ".sh"), script);
  return Run(absl::StrCat("cd ", tmp / build, " && env ", UnsetRoutedVariables(),
                          "KCACHE_LOG=1 KCACHE_STATE_DIR=", tmp / "state", " ", assignments, " ",
                          KcacheCli(), " run --store ", tmp / "store", " --shims ", tmp / "shims",
                          " ", flags, " -- sh ", file));
}

// How many times `part` occurs in `text`.
inline int Occurrences(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_KCACHE_RUN_H_
