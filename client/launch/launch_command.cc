#include "client/launch/launch_command.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/environment.h"
#include "core/run_process.h"
#include "engine/keys/observed_manifest.h"

namespace kcache::launch {
namespace {

namespace fs = std::filesystem;

std::string RealPath(const fs::path& path) {
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  return ec ? std::string() : real.string();
}

}  // namespace

bool IsCompilerName(const std::string& name) {
  for (const char* known : kCompilerNames) {
    if (name == known) return true;
  }
  return false;
}

bool IsLauncherInvocation(int argc, char** argv) {
  if (argc < 1) return false;
  if (IsCompilerName(fs::path(argv[0]).filename().string())) return true;
  return argc >= 2 && (IsCompilerName(argv[1]) || std::string(argv[1]) == "--" ||
                       std::string(argv[1]).find('/') != std::string::npos);
}

absl::StatusOr<LaunchCommand> ParseLaunchCommand(int argc, char** argv) {
  LaunchCommand command;
  int first_arg = 1;
  std::string self_name = argc >= 1 ? fs::path(argv[0]).filename().string() : "";
  if (IsCompilerName(self_name)) {
    command.compiler = self_name;  // a masquerade link
  } else if (argc >= 2 && std::string(argv[1]) == "--") {
    if (argc < 3) {
      return absl::InvalidArgumentError("`kcache --` needs a compiler: kcache -- COMPILER ARGS...");
    }
    command.compiler = argv[2];
    first_arg = 3;
  } else if (argc >= 2) {
    command.compiler = argv[1];
    first_arg = 2;
  } else {
    return absl::InvalidArgumentError("a launcher needs a compiler: kcache -- COMPILER ARGS...");
  }
  command.args.assign(argv + first_arg, argv + argc);
  return command;
}

std::string StateDir() {
  std::string dir = EnvValue("KCACHE_STATE_DIR");
  if (!dir.empty()) return dir;
  std::string home = EnvValue("HOME");
  return home.empty() ? "" : absl::StrCat(home, "/.cache/kcache");
}

std::string SelfExe() { return RealPath("/proc/self/exe"); }

objects::LauncherOptions LauncherOptionsFromEnvironment() {
  objects::LauncherOptions options;
  options.lookup.env = objects::CurrentEnvironment();
  std::string self = SelfExe();
  options.lookup.kcache_binaries.push_back(self);
  // The other binary of the pair: a masquerade link to either is never the real compiler.
  for (const char* name : {"kcache", kLaunchBinary}) {
    std::string other = RealPath(fs::path(self).parent_path() / name);
    if (!other.empty() && other != self) options.lookup.kcache_binaries.push_back(other);
  }
  options.base_dirs = absl::StrSplit(EnvValue("KCACHE_BASEDIR"), ':', absl::SkipEmpty());
  std::string state = StateDir();
  if (!state.empty()) {
    options.digest_table = absl::StrCat(state, "/file-digests");
    options.lookup.programs_memo = absl::StrCat(state, "/driver-programs");
    options.lookup.options_memo = absl::StrCat(state, "/compiler-options");
  }
  uint64_t max_bytes = 0;
  if (absl::SimpleAtoi(EnvValue("KCACHE_MAX_OBJECT_BYTES"), &max_bytes)) {
    options.max_object_bytes = max_bytes;
  }
  options.log = EnvValue("KCACHE_LOG") == "1";
  options.observe_library = objects::FindObserveLibrary(self);
  return options;
}

std::optional<int> PassThroughInsideACompile(const objects::LauncherOptions& options,
                                             const LaunchCommand& command) {
  if (EnvValue(kInsideCompileEnv).empty()) {
    setenv(kInsideCompileEnv, "1", 1);
    return std::nullopt;
  }
  return ExecRealCompiler(options, command);
}

int ExecRealCompiler(const objects::LauncherOptions& options, const LaunchCommand& command) {
  CompilerFamily family = objects::FamilyOfCompiler(command.compiler);
  absl::StatusOr<std::string> real = family == CompilerFamily::kNvcc
                                         ? objects::FindNvcc(options.lookup)
                                         : objects::FindCompiler(command.compiler, options.lookup);
  if (!real.ok()) {
    std::fprintf(stderr, "kcache: %s\n", std::string(real.status().message()).c_str());
    return 127;
  }
  std::vector<std::string> argv = command.args;
  argv.insert(argv.begin(), *real);
  return ExecReplacing(argv);
}

void ClearInsideMark() { unsetenv(kInsideCompileEnv); }

}  // namespace kcache::launch
