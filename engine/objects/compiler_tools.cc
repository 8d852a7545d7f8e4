#include "engine/objects/compiler_tools.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/objects/run_process.h"

extern char** environ;

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

std::string RealPath(const std::string& path) {
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  return ec ? "" : real.string();
}

bool IsExecutable(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

std::string Get(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// The program `compiler -print-prog-name=NAME` names, by its real path; a bare name is looked
// up in PATH. "" when there is none (keyed as absent).
std::string ProgramOfDriver(const std::string& compiler, const std::string& name,
                            const ToolLookup& lookup) {
  absl::StatusOr<ProcessResult> run =
      RunCaptured({compiler, absl::StrCat("-print-prog-name=", name)});
  if (!run.ok() || run->exit_code != 0) return "";
  std::string program(absl::StripAsciiWhitespace(run->stdout_text));
  if (program.empty()) return "";
  if (program.find('/') == std::string::npos) {
    absl::StatusOr<std::string> found = FindCompiler(program, lookup);
    if (!found.ok()) return "";
    program = *found;
  }
  return RealPath(program);
}

}  // namespace

Environment CurrentEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text = *entry;
    size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
}

absl::StatusOr<std::string> FindCompiler(const std::string& name, const ToolLookup& lookup) {
  if (name.find('/') != std::string::npos) {
    if (!lookup.IsKcache(RealPath(name))) return name;
    return FindCompiler(fs::path(name).filename().string(), lookup);
  }
  std::string path_env = Get(lookup.env, "PATH");
  for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (IsExecutable(candidate) && !lookup.IsKcache(RealPath(candidate))) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("no '", name, "' other than kcache in PATH (", path_env,
                                          "); install the compiler or fix PATH"));
}

absl::StatusOr<std::string> FindNvcc(const ToolLookup& lookup) {
  for (const std::string& root : {Get(lookup.env, "CUDA_HOME"), std::string("/usr/local/cuda")}) {
    if (root.empty()) continue;
    std::string candidate = absl::StrCat(root, "/bin/nvcc");
    if (IsExecutable(candidate) && !lookup.IsKcache(RealPath(candidate))) return candidate;
  }
  return FindCompiler("nvcc", lookup);
}

absl::StatusOr<std::vector<ToolFile>> ToolFiles(const CompilerCommand& command,
                                                const std::string& compiler,
                                                const ToolLookup& lookup) {
  std::vector<ToolFile> tools;
  std::string real = RealPath(compiler);
  if (real.empty()) return absl::NotFoundError(absl::StrCat("cannot find ", compiler));
  if (command.family == CompilerFamily::kGcc) {
    tools.push_back({"compiler", real});
    if (RunsLinker(command.kind)) {
      std::string linker = ProgramOfDriver(compiler, "ld", lookup);
      if (linker.empty()) {
        return absl::NotFoundError(
            absl::StrCat(compiler, " names no linker (-print-prog-name=ld)"));
      }
      tools.push_back({"linker", linker});
      tools.push_back({"collect2", ProgramOfDriver(compiler, "collect2", lookup)});
    }
    return tools;
  }
  fs::path bin = fs::path(real).parent_path();
  fs::path nvvm = bin.parent_path() / "nvvm";
  for (const auto& [role, path] : std::vector<std::pair<std::string, fs::path>>{
           {"nvcc", real},
           {"nvcc.profile", bin / "nvcc.profile"},
           {"cicc", nvvm / "bin" / "cicc"},
           {"ptxas", bin / "ptxas"},
           {"cudafe++", bin / "cudafe++"},
           {"fatbinary", bin / "fatbinary"},
           {"nvlink", bin / "nvlink"},
           {"libdevice", nvvm / "libdevice" / "libdevice.10.bc"},
       }) {
    tools.push_back({role, RealPath(path.string())});
  }
  // nvcc's host compiler: -ccbin (a directory means its gcc), NVCC_CCBIN, else gcc.
  std::string host = command.ccbin.empty() ? Get(lookup.env, "NVCC_CCBIN") : command.ccbin;
  if (host.empty()) host = "gcc";
  std::error_code ec;
  if (fs::is_directory(host, ec)) host = (fs::path(host) / "gcc").string();
  absl::StatusOr<std::string> host_path = FindCompiler(host, lookup);
  if (!host_path.ok()) return host_path.status();
  tools.push_back({"host compiler", RealPath(*host_path)});
  return tools;
}

const std::vector<std::string>& KeyedEnvironment(CompilerFamily family) {
  // gcc reads these; nvcc passes them on to its host compiler and reads its own.
  static const std::vector<std::string> kGcc = {"CPATH",
                                                "C_INCLUDE_PATH",
                                                "CPLUS_INCLUDE_PATH",
                                                "OBJC_INCLUDE_PATH",
                                                "GCC_EXEC_PREFIX",
                                                "COMPILER_PATH",
                                                "SOURCE_DATE_EPOCH",
                                                "DEPENDENCIES_OUTPUT",
                                                "SUNPRO_DEPENDENCIES",
                                                "LANG",
                                                "LC_ALL",
                                                "LC_CTYPE",
                                                "LC_MESSAGES",
                                                "GCC_COMPARE_DEBUG"};
  static const std::vector<std::string> kNvcc = [] {
    std::vector<std::string> names = kGcc;
    for (const char* name : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVVMIR_LIBRARY_DIR",
                             "CICC_PATH", "CUDAFE_FLAGS", "PTXAS_FLAGS", "LIBRARIES", "INCLUDES"}) {
      names.push_back(name);
    }
    return names;
  }();
  return family == CompilerFamily::kNvcc ? kNvcc : kGcc;
}

const std::vector<std::string>& KeyedLinkEnvironment() {
  static const std::vector<std::string> kLink = {"LIBRARY_PATH",    "LD_RUN_PATH",
                                                 "LD_LIBRARY_PATH", "GNUTARGET",
                                                 "LDEMULATION",     "COLLECT_NO_DEMANGLE"};
  return kLink;
}

absl::StatusOr<std::string> NativeExpansion(const std::string& compiler,
                                            const std::vector<std::string>& native_args) {
  std::vector<std::string> argv = {compiler};
  argv.insert(argv.end(), native_args.begin(), native_args.end());
  argv.insert(argv.end(), {"-###", "-E", "-x", "c", "/dev/null"});
  absl::StatusOr<ProcessResult> run = RunCaptured(argv);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0 || run->stderr_text.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(compiler, " could not say what ", absl::StrJoin(native_args, " "),
                     " means here (", absl::StripAsciiWhitespace(run->stderr_text), ")"));
  }
  return run->stderr_text;
}

}  // namespace kcache::objects
