#include "client/cli/run_environment.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/cli/compiler_shims.h"
#include "client/cli/stand_in_env.h"
#include "client/cli/torch_compile_env.h"
#include "client/launch/launch_command.h"
#include "core/library_build.h"
#include "engine/keys/base_dirs.h"
#include "engine/keys/observed_manifest.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

std::string Normal(const std::string& path) {
  std::string normal = fs::path(path).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

// The masquerade name for `generic` (c++, cc): GCC's own (g++, gcc) when both name the same
// compiler in PATH. Tools tell GCC by its --version line, which says the name it was run by:
// Inductor names its precompiled header .gch only for a compiler it sees as GCC, and GCC
// reads no other.
std::string CompilerName(const std::string& generic, const std::string& gnu,
                         const objects::ToolLookup& lookup) {
  absl::StatusOr<std::string> plain = objects::FindCompiler(generic, lookup);
  absl::StatusOr<std::string> named = objects::FindCompiler(gnu, lookup);
  return plain.ok() && named.ok() && SameFile(*plain, *named) ? gnu : generic;
}

// Builds a Routing: sets variables, keeps the environment's own with a note.
class Router {
 public:
  Router(const objects::ToolLookup& current, std::string launcher)
      : current_(current), launcher_(std::move(launcher)) {}

  // Sets `name`; a second Set of it replaces the first's value, where it was.
  void Set(const std::string& name, const std::string& value) {
    for (auto& [set, was] : routing_.env) {
      if (set == name) {
        was = value;
        return;
      }
    }
    routing_.env.emplace_back(name, value);
  }
  void Note(std::string note) { routing_.notes.push_back(std::move(note)); }
  const std::string& Had(const std::string& name) const {
    static const std::string kNone;
    auto it = current_.env.find(name);
    return it == current_.env.end() ? kNone : it->second;
  }
  // Whether the environment leaves `name` to kcache: unset, or naming kcache already.
  bool Ours(const std::string& name) const {
    return Had(name).empty() || NamesKcache(Had(name), current_);
  }

  // A compiler variable: `link` when it is ours or names `runs` (what the link runs), else
  // kept with a note saying what still reaches it.
  void Compiler(const std::string& name, const std::string& link, const std::string& runs,
                const std::string& reached_by) {
    if (Ours(name) || SameFile(FindProgram(Had(name), current_), runs)) {
      Set(name, link);
      return;
    }
    Note(absl::StrCat("$", name, " (", Had(name), ") is kept: it is not ",
                      runs.empty() ? "a compiler kcache's links run" : runs,
                      ", which kcache's link runs; ", reached_by));
  }

  // A launcher variable: kcache-launch when it is ours; true then. Else kept with a note.
  bool Launcher(const std::string& name) {
    if (Ours(name)) {
      Set(name, launcher_);
      return true;
    }
    Note(absl::StrCat("$", name, " (", Had(name),
                      ") is kept: kcache does not put itself behind another launcher; the "
                      "compiler it runs is kcache's link where the build names one"));
    return false;
  }

  // A launcher variable and the compiler variable a tool puts after it (CMake's, FlashInfer's):
  // kcache-launch in front of the real nvcc (a link after a launcher would be looked up by its
  // name in PATH, not in the toolkit); with the environment's own launcher, the link.
  void LauncherAndNvcc(const std::string& launcher, const std::string& nvcc,
                       const std::string& real_nvcc, const std::string& link) {
    if (Launcher(launcher)) {
      if (Ours(nvcc)) Set(nvcc, real_nvcc);  // else kcache-launch runs the nvcc it names
    } else {
      Compiler(nvcc, link, real_nvcc, "nothing routes it through kcache");
    }
  }

  Routing Take() { return std::move(routing_); }

 private:
  const objects::ToolLookup& current_;
  std::string launcher_;
  Routing routing_;
};

// PATH with `first` in front and kcache's shim directories taken out.
std::string RoutedPath(const std::string& path, const std::string& first,
                       const std::vector<std::string>& ours) {
  std::vector<std::string> dirs = {first};
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string normal = Normal(std::string(dir));
    if (std::find(ours.begin(), ours.end(), normal) == ours.end()) dirs.emplace_back(dir);
  }
  return absl::StrJoin(dirs, ":");
}

}  // namespace

void AddRoutingFlags(CLI::App* sub, RoutingFlags& flags) {
  auto* store = sub->add_option("--store", flags.store,
                                "store directory the compilers' outputs go to and come from "
                                "(created when absent; the image build)");
  auto* server = sub->add_option("--server", flags.server,
                                 "kcached address (unix:PATH or host:port) to get and put them");
  store->excludes(server);
  sub->add_option("--redis", flags.redis,
                  "with --server: route torch.compile's Inductor and Triton caches through that "
                  "kcached's Redis door too; alone (before -- or another option), the door "
                  "kcached reports (its --redis-listen, best a unix socket), or name one: "
                  "unix:///PATH or HOST:PORT")
      ->needs(server);
  sub->add_flag(kRedisFromKcached, flags.redis_from_kcached)->needs(server)->group("");
  sub->add_flag("--no-triton", flags.no_triton,
                "with --redis: route Inductor's caches only and leave Triton's its local "
                "directory (for a worker whose Python lacks the kcache package, which Triton "
                "would fail to import)");
  sub->add_flag("--no-nvrtc", flags.no_nvrtc,
                "leave NVRTC alone; else LD_PRELOAD gets kcache's libnvrtc.so.13 stand-in, "
                "which forwards every NVRTC call of the command's processes (torch, CuPy, "
                "cuda-python, DeepGEMM, a program linked with -lnvrtc) to the NVRTC that "
                "process would load without kcache (KCACHE_REAL_NVRTC when the environment "
                "names one), and serves their compiles from kcache (docs/nvrtc-standin.md); and, "
                "where there is an NVRTC 12, its libnvrtc.so.12 stand-in");
  sub->add_flag("--no-cuda", flags.no_cuda,
                "leave the CUDA driver alone; else, on a node with a driver, LD_PRELOAD gets "
                "kcache's libcuda.so.1 stand-in, which forwards every driver call to the real "
                "driver, KCACHE_REAL_LIBCUDA, and gives a module load whose image has PTX but no "
                "SASS for the GPU the SASS kcache holds for it (docs/ptx-libraries.md); "
                "KCACHE_CUDA_STANDIN=0 in the environment does the same");
  sub->add_option("--arch", flags.arch,
                  "TORCH_CUDA_ARCH_LIST and FLASHINFER_CUDA_ARCH_LIST for the command, "
                  "comma-separated, e.g. 7.5,8.6,8.9,9.0");
  sub->add_option("--shims", flags.shims,
                  "directory of the masquerade links (nvcc, c++, cc, ...) and the shim CUDA "
                  "toolkit; default $KCACHE_STATE_DIR/shims (~/.cache/kcache/shims)");
  sub->add_option("--base-dir", flags.base_dirs,
                  "colon-separated directories whose paths are keyed relative to them (besides "
                  "the build directory), e.g. the source tree; KCACHE_BASEDIR");
}

namespace {

// The shims directory (absolute), with its links and its without-nvcc/ directory made.
absl::StatusOr<std::string> MakeShimDirs(const RoutingFlags& flags, const std::string& launcher) {
  std::string dir = flags.shims;
  if (dir.empty()) {
    if (launch::StateDir().empty()) {
      return absl::InvalidArgumentError(
          "no shims directory: give --shims DIR or set KCACHE_STATE_DIR (HOME is not set)");
    }
    dir = absl::StrCat(launch::StateDir(), "/shims");
  }
  std::error_code ec;
  std::string shims = Normal(fs::absolute(dir, ec).string());
  if (absl::Status made = MakeShims(shims, {"nvcc", "c++", "g++", "cc", "gcc"}, launcher);
      !made.ok()) {
    return made;
  }
  if (absl::Status made =
          MakeShims(absl::StrCat(shims, "/without-nvcc"), {"c++", "g++", "cc", "gcc"}, launcher);
      !made.ok()) {
    return made;
  }
  return shims;
}

// CXX, CC and PYTORCH_NVCC (`real_nvcc` "" without a toolkit).
void RouteCompilerVariables(Router& router, const objects::ToolLookup& current,
                            const std::string& shims, const std::string& real_nvcc) {
  router.Compiler("PYTORCH_NVCC", absl::StrCat(shims, "/nvcc"), real_nvcc,
                  "torch runs it without kcache");
  for (const auto& [name, generic, gnu] :
       {std::tuple<const char*, const char*, const char*>{"CXX", "c++", "g++"},
        {"CC", "cc", "gcc"}}) {
    std::string link = CompilerName(generic, gnu, current);
    absl::StatusOr<std::string> runs = objects::FindCompiler(link, current);
    router.Compiler(name, absl::StrCat(shims, "/", link), runs.ok() ? *runs : "",
                    "only $CMAKE_*_COMPILER_LAUNCHER and $FLASHINFER_CXX_LAUNCHER reach it");
  }
}

// PATH: the links first; nvcc's only where PATH's nvcc is the toolkit's (a link runs that).
void RoutePath(Router& router, const objects::ToolLookup& current, const std::string& shims,
               const std::string& real_nvcc) {
  std::string without_nvcc = absl::StrCat(shims, "/without-nvcc");
  absl::StatusOr<std::string> path_nvcc = objects::FindCompiler("nvcc", current);
  bool nvcc_in_path = !real_nvcc.empty() && path_nvcc.ok() && SameFile(*path_nvcc, real_nvcc);
  if (path_nvcc.ok() && !nvcc_in_path) {
    router.Note(absl::StrCat("nvcc in PATH (", *path_nvcc, ") is left as it is: it is not ",
                             real_nvcc.empty() ? "a toolkit's bin/nvcc" : real_nvcc,
                             ", the nvcc kcache's links run"));
  }
  router.Set("PATH", RoutedPath(Variable(current.env, "PATH"), nvcc_in_path ? shims : without_nvcc,
                                {shims, without_nvcc}));
}

// The toolkit's variables and the launcher variables (`root` "" without a toolkit).
absl::Status RouteToolkitAndLaunchers(Router& router, const std::string& shims,
                                      const std::string& root, const std::string& launcher) {
  if (!root.empty()) {
    absl::StatusOr<std::string> shim_root = MakeShimToolkit(shims, root, launcher);
    if (!shim_root.ok()) return shim_root.status();
    std::string real_nvcc = absl::StrCat(root, "/bin/nvcc");
    router.Set("CUDA_HOME", *shim_root);
    router.Set("CUDA_PATH", *shim_root);
    router.Set("KCACHE_REAL_CUDA_HOME", root);
    router.Compiler("DG_JIT_NVCC_COMPILER", absl::StrCat(shims, "/nvcc"), real_nvcc,
                    "DeepGEMM runs it without kcache");
    std::string root_link = absl::StrCat(*shim_root, "/bin/nvcc");
    router.LauncherAndNvcc("CMAKE_CUDA_COMPILER_LAUNCHER", "CUDACXX", real_nvcc, root_link);
    router.LauncherAndNvcc("FLASHINFER_NVCC_LAUNCHER", "FLASHINFER_NVCC", real_nvcc, root_link);
  } else {
    router.Launcher("CMAKE_CUDA_COMPILER_LAUNCHER");
    router.Launcher("FLASHINFER_NVCC_LAUNCHER");
  }
  for (const char* name :
       {"CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_C_COMPILER_LAUNCHER", "FLASHINFER_CXX_LAUNCHER"}) {
    router.Launcher(name);
  }
  return absl::OkStatus();
}

// torch.compile's variables for --redis.
absl::Status RouteRedis(Router& router, const RoutingFlags& flags) {
  std::string door = flags.redis;
  if (door.empty()) {
    absl::StatusOr<std::string> asked = AskKcachedForDoor(flags.server);
    if (!asked.ok()) return asked.status();
    door = *asked;
  }
  if (std::string warning = TcpDoorWarning(door); !warning.empty()) {
    std::fprintf(stderr, "%s\n", warning.c_str());
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> compile =
      TorchCompileEnvironment(door, !flags.no_triton);
  if (!compile.ok()) return compile.status();
  for (const auto& [name, value] : *compile) router.Set(name, value);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RealToolkitRoot(const objects::ToolLookup& lookup) {
  std::string nested = Variable(lookup.env, "KCACHE_REAL_CUDA_HOME");
  if (!nested.empty()) return Normal(nested);
  for (const char* name : {"CUDA_HOME", "CUDA_PATH"}) {
    std::string root = Variable(lookup.env, name);
    if (root.empty()) continue;
    if (NamesKcache(absl::StrCat(root, "/bin/nvcc"), lookup)) {
      return absl::InvalidArgumentError(
          absl::StrCat("$", name, " (", root,
                       ") is a kcache shim toolkit but KCACHE_REAL_CUDA_HOME is not set: set "
                       "it to the toolkit root the shim mirrors, or ",
                       name, " to that root"));
    }
    return Normal(root);
  }
  absl::StatusOr<std::string> nvcc = objects::FindCompiler("nvcc", lookup);
  if (nvcc.ok()) return Normal(fs::path(*nvcc).parent_path().parent_path().string());
  std::error_code ec;
  return fs::exists("/usr/local/cuda", ec) ? "/usr/local/cuda" : "";
}

absl::StatusOr<Routing> RoutingEnvironment(const RoutingFlags& flags,
                                           const objects::ToolLookup& current) {
  if (flags.store.empty() == flags.server.empty()) {
    return absl::InvalidArgumentError("give exactly one of --store DIR and --server ADDR");
  }
  if (flags.no_triton && flags.redis.empty() && !flags.redis_from_kcached) {
    return absl::InvalidArgumentError("--no-triton goes with --redis");
  }
  std::string launcher = LauncherBinary();
  absl::StatusOr<std::string> shims = MakeShimDirs(flags, launcher);
  if (!shims.ok()) return shims.status();
  absl::StatusOr<std::string> root = RealToolkitRoot(current);
  if (!root.ok()) return root.status();
  std::string nvrtc_root = *root;  // its NVRTC, whether or not it has an nvcc
  std::string real_nvcc = root->empty() ? "" : absl::StrCat(*root, "/bin/nvcc");
  if (real_nvcc.empty() || FindProgram(real_nvcc, current).empty() ||
      NamesKcache(real_nvcc, current)) {
    root->clear();  // no toolkit with an nvcc: nothing of CUDA's is routed
    real_nvcc.clear();
  }

  Router router(current, launcher);
  if (!flags.store.empty()) {
    std::error_code ec;
    router.Set("KCACHE_STORE", Normal(fs::absolute(flags.store, ec).string()));
  } else {
    router.Set("KCACHE_SERVER", flags.server);
  }
  router.Set(objects::kShimsDirVariable, *shims);
  RouteCompilerVariables(router, current, *shims, real_nvcc);
  // torch puts ccache or sccache in front of $CXX when one is on PATH: kcache is the cache.
  router.Set("TORCH_NO_COMPILER_WRAPPER", "1");
  if (!flags.arch.empty()) {
    router.Set("TORCH_CUDA_ARCH_LIST", absl::StrReplaceAll(flags.arch, {{",", ";"}}));
    router.Set("FLASHINFER_CUDA_ARCH_LIST", absl::StrReplaceAll(flags.arch, {{",", " "}}));
  }
  if (!flags.base_dirs.empty()) router.Set("KCACHE_BASEDIR", flags.base_dirs);
  RoutePath(router, current, *shims, real_nvcc);
  if (absl::Status routed = RouteToolkitAndLaunchers(router, *shims, *root, launcher);
      !routed.ok()) {
    return routed;
  }
  if (!flags.redis.empty() || flags.redis_from_kcached) {
    if (absl::Status routed = RouteRedis(router, flags); !routed.ok()) return routed;
  }
  // Each stand-in sees the LD_PRELOAD the one before it left.
  std::string observer = objects::FindObserveLibrary(launch::SelfExe());
  objects::Environment env = current.env;
  auto route = [&](StandInRouting stand_in) {
    for (const auto& [name, value] : stand_in.env) {
      router.Set(name, value);
      env[name] = value;
    }
    for (std::string& note : stand_in.notes) router.Note(std::move(note));
  };
  route(RouteNvrtc(env, objects::FindNvrtcStandIn(observer, 13), FindNvrtc(13, current, nvrtc_root),
                   !flags.no_nvrtc));
  route(RouteNvrtc12(env, objects::FindNvrtcStandIn(observer, 12),
                     FindNvrtc(12, current, nvrtc_root), !flags.no_nvrtc));
  // The operator's off switch, for a pod whose command line is not theirs to change.
  const bool no_cuda = flags.no_cuda || Variable(current.env, "KCACHE_CUDA_STANDIN") == "0";
  if (no_cuda && !flags.no_cuda) {
    router.Note("KCACHE_CUDA_STANDIN=0: kcache's CUDA driver stand-in is not preloaded");
  }
  StandInRouting cuda =
      RouteCuda(env, objects::FindCudaStandIn(observer), no_cuda ? "" : FindCudaDriver(), !no_cuda);
  StandInStart cuda_start = cuda.start;
  route(std::move(cuda));
  Routing routing = router.Take();
  routing.cuda_stand_in = cuda_start;
  return routing;
}

objects::Environment Routed(const objects::ToolLookup& current, const Routing& routing) {
  objects::Environment env = current.env;
  for (const auto& [name, value] : routing.env) env[name] = value;
  return env;
}

}  // namespace kcache::cli
