// BuildFatbin (fatbin.h): the toolkit's fatbinary, run with posix_spawn.
#include "client/cli/mixed_fatbin.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "engine/compile/toolkit.h"

extern char** environ;

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs argv with stdout and stderr into `log`; the exit status, or -1 when it did not start.
int RunTool(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

absl::StatusOr<std::string> BuildFatbin(const std::string& toolkit_root,
                                        const std::vector<SmCubin>& cubins) {
  if (cubins.empty()) return absl::InvalidArgumentError("no cubin to put in a fatbin");
  fs::path tool =
      fs::path(toolkit_root.empty() ? Toolkit::DefaultRoot() : toolkit_root) / "bin" / "fatbinary";
  if (access(tool.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no fatbin builder: ", tool.string(),
                     " is not there; give a CUDA toolkit with --toolkit, or take the cubins"));
  }
  std::string pattern = (fs::temp_directory_path() / "kcache-fatbin-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make a temporary directory ", pattern));
  }
  fs::path dir(pattern);
  std::vector<std::string> args = {tool.string(),
                                   absl::StrCat("--create=", (dir / "out.fatbin").string())};
  for (const SmCubin& c : cubins) {
    fs::path file = dir / absl::StrCat("sm_", c.arch, ".cubin");
    std::ofstream(file, std::ios::binary)
        .write(c.cubin.data(), static_cast<std::streamsize>(c.cubin.size()));
    args.push_back(absl::StrCat("--image3=kind=elf,sm=", c.arch, ",file=", file.string()));
  }
  int status = RunTool(args, dir / "log");
  absl::StatusOr<std::string> out = ReadAll(dir / "out.fatbin");
  if (status != 0 || out->empty()) {
    out = absl::InternalError(
        absl::StrCat(tool.string(), " failed (exit ", status, "): ", ReadAll(dir / "log")));
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return out;
}

}  // namespace kcache::cli
