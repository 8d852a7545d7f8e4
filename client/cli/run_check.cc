#include "client/cli/run_check.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/compiler_shims.h"
#include "client/cli/stand_in_env.h"
#include "client/launch/launch_command.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

// What a launcher given `compiler` runs: for a masquerade link or `kcache-launch nvcc`, the
// name alone decides (nvcc: FindNvcc; the others: FindCompiler, skipping kcache's links), as
// the launchers' RealCompiler (engine/launcher/prepared_command.h) decides.
std::string LauncherRuns(const std::string& compiler, const objects::ToolLookup& lookup) {
  absl::StatusOr<std::string> real =
      compiler == "nvcc" ? objects::FindNvcc(lookup) : objects::FindCompiler(compiler, lookup);
  return real.ok() ? *real : absl::StrCat("an error (", real.status().message(), ")");
}

class Checker {
 public:
  Checker(const objects::ToolLookup& routed, std::string server_silent)
      : routed_(routed), server_silent_(std::move(server_silent)) {}

  // A way that runs `program` (a path or a name in PATH) as the compiler.
  void Direct(const std::string& way, const std::string& program) {
    std::string file = FindProgram(program, routed_);
    if (file.empty()) {
      Line(way, absl::StrCat(program, ": none"), true);
      return;
    }
    const std::string& shown = file;
    if (!NamesKcache(file, routed_)) {
      Line(way, absl::StrCat(shown, " (not through kcache)"), false);
      return;
    }
    std::string name = fs::path(file).filename().string();
    if (!launch::IsCompilerName(name)) {
      Line(way, absl::StrCat(shown, " -> kcache, which takes no compiler by that name"), false);
      return;
    }
    Line(way,
         absl::StrCat(shown, " -> ", launch::kLaunchBinary, " -> ", LauncherRuns(name, routed_)),
         true);
  }

  // A way that runs `launcher` with `compiler` after it (CMake's and FlashInfer's).
  void Launched(const std::string& way, const std::string& launcher, const std::string& compiler) {
    if (launcher.empty()) {
      Direct(way, compiler);
      return;
    }
    if (!NamesKcache(launcher, routed_)) {
      Line(way, absl::StrCat(launcher, " (not kcache) ", compiler), false);
      Direct(absl::StrCat(way, ", after ", launcher), compiler);
      return;
    }
    // `kcache-launch COMPILER`: a compiler name or any path is the compiler; another name is
    // taken for one of kcache's commands.
    if (compiler.find('/') == std::string::npos && !launch::IsCompilerName(compiler)) {
      Line(way,
           absl::StrCat(launcher, " ", compiler, ": kcache takes no compiler named ", compiler,
                        " (name it by its path)"),
           false);
      return;
    }
    Line(way, absl::StrCat(launcher, " ", compiler, " -> ", LauncherRuns(compiler, routed_)), true);
  }

  // One of kcache's stand-ins for a CUDA library in the command's processes
  // (stand_in_env.h).
  struct StandInLine {
    const char* library;        // its file name, "libnvrtc.so.13"
    const char* cache;          // its cache half beside it, "libkcache-nvrtc.so"
    const char* real_variable;  // the variable naming the real library
    std::string found_without;  // which real library it takes without that variable
    const char* absent;         // the line when LD_PRELOAD has no stand-in
    const char* served;         // the end of the line when it serves
    std::string not_served;     // why it forwards only, its cache half there; "": it serves
  };

  // What a process of the routed environment loads as libnvrtc.so.`major` without kcache: for
  // PATH's python3 and for others, when those differ (stand_in_env.h FindNvrtc).
  std::string NvrtcFor(int major) const {
    std::string root = Variable(routed_.env, "KCACHE_REAL_CUDA_HOME");
    std::string python = FindNvrtc(major, routed_, root);
    objects::ToolLookup no_python = routed_;
    no_python.env["PATH"] = "";
    std::string other = FindNvrtc(major, no_python, root);
    if (python == other) return python.empty() ? "none here" : absl::StrCat("here: ", python);
    return absl::StrCat("python3 on PATH: ", python.empty() ? "none" : python,
                        "; other programs: ", other.empty() ? "none" : other);
  }

  // The stand-in in LD_PRELOAD, the real library it forwards to, and whether it serves. Said,
  // not counted in all_through: a command may not use the library, and --no-nvrtc / --no-cuda
  // leave it out on purpose.
  void StandIn(const std::string& way, const StandInLine& line) {
    std::string stand_in = Preloaded(line.library);
    std::string chain;
    if (stand_in.empty()) {
      chain = line.absent;
    } else {
      std::string real = Variable(routed_.env, line.real_variable);
      std::error_code ec;
      bool cache = fs::exists(fs::path(stand_in).parent_path() / line.cache, ec);
      chain = absl::StrCat(
          stand_in, " -> ", real.empty() ? line.found_without : real,
          !cache ? absl::StrCat(", forwarded only (no ", line.cache, " beside the stand-in)")
          : line.not_served.empty() ? std::string(line.served)
                                    : absl::StrCat(", forwarded only (", line.not_served, ")"));
    }
    absl::StrAppend(&report_.text, way, ": ", chain, "\n");
  }

  // Why kcached cannot be asked: none named, or it did not answer; "" when it can.
  std::string NoServer() const {
    std::string server = Variable(routed_.env, "KCACHE_SERVER");
    if (server.empty()) return "no KCACHE_SERVER to ask";
    if (!server_silent_.empty()) {
      return absl::StrCat("kcached at ", server, " does not answer: ", server_silent_);
    }
    return "";
  }

  // The line that kcached does not answer, which makes the report not all through.
  void Server() {
    if (Variable(routed_.env, "KCACHE_SERVER").empty() || server_silent_.empty()) return;
    Line("kcached", absl::StrCat(NoServer(), ": nothing is cached through it"), false);
  }

  // NVRTC's stand-ins, 13's and 12's: each caches with a kcached or a store.
  void Nvrtc(const std::string& way, const std::string& way12) {
    std::string not_served;
    if (Variable(routed_.env, "KCACHE_STORE").empty()) {
      not_served = Variable(routed_.env, "KCACHE_SERVER").empty()
                       ? "neither KCACHE_SERVER nor KCACHE_STORE"
                       : NoServer();
    }
    StandIn(way, {"libnvrtc.so.13", "libkcache-nvrtc.so", "KCACHE_REAL_NVRTC",
                  absl::StrCat("the libnvrtc.so.13 each process would load without kcache (",
                               NvrtcFor(13), ")"),
                  "the real libnvrtc.so.13 (not through kcache: no stand-in in LD_PRELOAD)",
                  ", cached", not_served});
    StandIn(way12, {"libnvrtc.so.12", "libkcache-nvrtc.so", "KCACHE_REAL_NVRTC_12",
                    absl::StrCat("the libnvrtc.so.12 each process would load without kcache (",
                                 NvrtcFor(12), ")"),
                    "no stand-in (no NVRTC 12 here: a CUDA 12 toolkit's, or the "
                    "nvidia-cuda-nvrtc-cu12 wheel of PATH's python3; KCACHE_REAL_NVRTC_12 "
                    "names one)",
                    ", cached", not_served});
  }

  // The driver's stand-in: it serves module loads with a kcached to ask.
  void Cuda(const std::string& way) {
    StandIn(way, {"libcuda.so.1", "libkcache-cuda.so", "KCACHE_REAL_LIBCUDA",
                  "the first libcuda.so.1 of the driver directories",
                  "the driver's own (no stand-in in LD_PRELOAD: no driver on this node, "
                  "--no-cuda or KCACHE_CUDA_STANDIN=0, or a driver it cannot stand in for, "
                  "which a note names)",
                  ", PTX-only images served SASS from kcache", NoServer()});
  }

  RouteReport Take() { return std::move(report_); }

 private:
  // The entry of the routed LD_PRELOAD whose file is named `name`; "" when none is.
  std::string Preloaded(const std::string& name) const {
    std::string found;
    for (const std::string& entry : std::vector<std::string>(absl::StrSplit(
             Variable(routed_.env, "LD_PRELOAD"), absl::ByAnyChar(": "), absl::SkipEmpty()))) {
      std::error_code ec;
      if (fs::path(entry).filename() == name && fs::is_regular_file(entry, ec)) found = entry;
    }
    return found;
  }

  void Line(const std::string& way, const std::string& chain, bool through) {
    absl::StrAppend(&report_.text, way, ": ", chain, "\n");
    report_.all_through = report_.all_through && through;
  }

  const objects::ToolLookup& routed_;
  const std::string server_silent_;
  RouteReport report_;
};

}  // namespace

RouteReport CheckRoutes(const objects::ToolLookup& routed, const std::vector<std::string>& command,
                        const std::string& server_silent) {
  const objects::Environment& env = routed.env;
  Checker check(routed, server_silent);
  for (const char* name : launch::kCompilerNames) {
    check.Direct(absl::StrCat(name, " via PATH"), name);
  }
  std::string cuda_home = Variable(env, "CUDA_HOME");
  if (!cuda_home.empty()) {
    check.Direct("nvcc via $CUDA_HOME/bin/nvcc (torch, FlashInfer, DeepGEMM)",
                 absl::StrCat(cuda_home, "/bin/nvcc"));
  }
  std::string cuda_path = Variable(env, "CUDA_PATH");
  if (!cuda_path.empty() && cuda_path != cuda_home) {
    check.Direct("nvcc via $CUDA_PATH/bin/nvcc", absl::StrCat(cuda_path, "/bin/nvcc"));
  }
  auto nvcc_or = [&](const std::string& name, const std::string& otherwise) {
    std::string value = Variable(env, name);
    return value.empty() ? otherwise : value;
  };
  std::string toolkit_nvcc = cuda_home.empty() ? "nvcc" : absl::StrCat(cuda_home, "/bin/nvcc");
  check.Direct("nvcc via $PYTORCH_NVCC (torch.utils.cpp_extension)",
               nvcc_or("PYTORCH_NVCC", toolkit_nvcc));
  check.Direct("nvcc via $DG_JIT_NVCC_COMPILER (DeepGEMM's nvcc mode)",
               nvcc_or("DG_JIT_NVCC_COMPILER", toolkit_nvcc));
  check.Launched("nvcc via $FLASHINFER_NVCC_LAUNCHER $FLASHINFER_NVCC (FlashInfer)",
                 Variable(env, "FLASHINFER_NVCC_LAUNCHER"),
                 nvcc_or("FLASHINFER_NVCC", toolkit_nvcc));
  check.Launched("nvcc via $CMAKE_CUDA_COMPILER_LAUNCHER $CUDACXX (CMake, configured here)",
                 Variable(env, "CMAKE_CUDA_COMPILER_LAUNCHER"), nvcc_or("CUDACXX", "nvcc"));
  check.Direct("c++ via $CXX (setuptools, torch, Makefiles)", nvcc_or("CXX", "c++"));
  check.Direct("cc via $CC (setuptools, Makefiles; nvcc -ccbin in FlashInfer)",
               nvcc_or("CC", "cc"));
  check.Launched("c++ via $FLASHINFER_CXX_LAUNCHER $CXX (FlashInfer)",
                 Variable(env, "FLASHINFER_CXX_LAUNCHER"), nvcc_or("CXX", "c++"));
  check.Launched("c++ via $CMAKE_CXX_COMPILER_LAUNCHER $CXX (CMake, configured here)",
                 Variable(env, "CMAKE_CXX_COMPILER_LAUNCHER"), nvcc_or("CXX", "c++"));
  check.Launched("cc via $CMAKE_C_COMPILER_LAUNCHER $CC (CMake, configured here)",
                 Variable(env, "CMAKE_C_COMPILER_LAUNCHER"), nvcc_or("CC", "cc"));
  if (!command.empty() && (launch::IsCompilerName(fs::path(command[0]).filename().string()) ||
                           NamesKcache(command[0], routed))) {
    check.Direct("the command itself", command[0]);
  }
  check.Nvrtc("NVRTC in the process (CuPy, cuda.core, DeepGEMM's NVRTC mode, torch)",
              "NVRTC 12 in the process (CUDA 12 builds of those)");
  check.Cuda("module loads in the process (libraries' PTX the driver would JIT)");
  check.Server();
  return check.Take();
}

}  // namespace kcache::cli
