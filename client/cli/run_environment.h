// The environment `kcache run` gives its command and `kcache env` prints: every way a build
// finds nvcc and the host compilers leads to kcache's launchers (docs/jit-libraries.md lists
// the libraries and what each reads), and none runs another compiler than it would without
// kcache.
//
//   KCACHE_STORE | KCACHE_SERVER   where the compiles' outputs go and come from
//   KCACHE_SHIMS_DIR      the shims directory, which keys write as "@shims@"
//                         (engine/keys/base_dirs.h): entries serve any user's
//   PATH                  the shims directory first: links nvcc, c++, g++, cc, gcc (nvcc only
//                         when PATH's nvcc is the toolkit's; else <shims>/without-nvcc)
//   CUDA_HOME, CUDA_PATH  a shim toolkit root mirroring the real one, bin/nvcc a link
//                         (compiler_shims.h); KCACHE_REAL_CUDA_HOME the real root, which the
//                         launchers' nvcc is taken from
//   PYTORCH_NVCC, DG_JIT_NVCC_COMPILER, CXX, CC       links (torch, DeepGEMM, setuptools, ...)
//   CMAKE_{CUDA,CXX,C}_COMPILER_LAUNCHER, FLASHINFER_{NVCC,CXX}_LAUNCHER   kcache-launch, in
//                         front of the compiler those tools name; CUDACXX and FLASHINFER_NVCC
//                         name the real nvcc for them (a launcher resolves a link's name in
//                         PATH, not the toolkit)
//   TORCH_NO_COMPILER_WRAPPER=1, TORCH_CUDA_ARCH_LIST and FLASHINFER_CUDA_ARCH_LIST (--arch),
//   KCACHE_BASEDIR (--base-dir), and with --redis torch.compile's (torch_compile_env.h).
//   LD_PRELOAD            kcache's NVRTC stand-in, unless --no-nvrtc (stand_in_env.h), each
//                         process's forwarding to the NVRTC it would load without it
//                         (KCACHE_REAL_NVRTC kept where set); the NVRTC 12 stand-in, where
//                         there is an NVRTC 12 (stand_in_env.h FindNvrtc)
//   LD_PRELOAD, KCACHE_REAL_LIBCUDA  on a node with a CUDA driver, kcache's driver stand-in and
//                         the real driver, unless --no-cuda or KCACHE_CUDA_STANDIN=0
//                         (stand_in_env.h)
//
// A variable the environment already sets to a compiler other than the one kcache's link
// would run (CC=/opt/gcc-13/bin/gcc) is kept, and so is a launcher variable naming another
// launcher (ccache): each is a note (Routing::notes) instead. The toolkit root is, as torch
// finds it: $KCACHE_REAL_CUDA_HOME (a nested run), $CUDA_HOME, $CUDA_PATH, the directory
// above PATH's first nvcc's, /usr/local/cuda; without a bin/nvcc there, nothing CUDA's is set
// but PYTORCH_NVCC and the launcher variables.
#ifndef KCACHE_CLIENT_CLI_RUN_ENVIRONMENT_H_
#define KCACHE_CLIENT_CLI_RUN_ENVIRONMENT_H_

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/protocol.h"
#include "engine/keys/compiler_tools.h"

namespace kcache::cli {

// `kcache run` and `kcache env`'s shared flags.
struct RoutingFlags {
  std::string store, server, arch, shims, base_dirs, redis;
  bool no_triton = false;
  bool no_nvrtc = false;
  bool no_cuda = false;
  bool redis_from_kcached = false;  // --redis without an address (ArgsForParse)
};
void AddRoutingFlags(CLI::App* sub, RoutingFlags& flags);

// What a --redis without an address becomes (ArgsForParse): a flag of its own, since CLI11
// would take a `--` after an option with an optional value as the end of that value.
inline constexpr char kRedisFromKcached[] = "--redis-from-kcached";

struct Routing {
  // The variables to set, in order (NAME, VALUE).
  std::vector<std::pair<std::string, std::string>> env;
  // What is left as the environment had it, and why: one line each.
  std::vector<std::string> notes;
  // Whether kcache's CUDA driver stand-in was preloaded, refused by its start check, or off.
  StandInStart cuda_stand_in = StandInStart::kNotRouted;
};

// The routing for `flags` from the environment in `current` (its env and kcache binaries).
// Makes the shims directory (--shims, default $KCACHE_STATE_DIR/shims), its without-nvcc/
// directory and the shim toolkit root. InvalidArgument for flags that do not go together or a
// $CUDA_HOME that is a shim root without $KCACHE_REAL_CUDA_HOME; FailedPrecondition when a
// link cannot be made; kcached's error when --redis asks it for its door.
// The root of the CUDA toolkit a process of `lookup`'s environment would use without kcache, as
// torch finds it: $KCACHE_REAL_CUDA_HOME (a nested run), $CUDA_HOME, $CUDA_PATH, the directory
// above PATH's first nvcc's, /usr/local/cuda; "" when none. InvalidArgument for a $CUDA_HOME
// that is a shim root of kcache's own without $KCACHE_REAL_CUDA_HOME.
absl::StatusOr<std::string> RealToolkitRoot(const objects::ToolLookup& lookup);

absl::StatusOr<Routing> RoutingEnvironment(const RoutingFlags& flags,
                                           const objects::ToolLookup& current);

// `current`'s environment with `routing`'s variables set.
objects::Environment Routed(const objects::ToolLookup& current, const Routing& routing);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_RUN_ENVIRONMENT_H_
