// kcache-launch: the compiler launcher that masquerade links (nvcc, c++, cc, ...) point at.
// It serves a hit through kcached's fast path (KCACHE_SERVER a unix socket) without loading
// gRPC, RocksDB or the rest of `kcache`: a process start of a few milliseconds instead of
// ~16. A command it cannot serve that way (a miss, a store directory, a TCP address, no fast
// socket) is handed to `kcache` beside it, unchanged; uncached commands run the real compiler
// here, as `kcache` would.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "client/launch/fast_object_cache.h"
#include "client/launch/launch_command.h"

namespace {

namespace fs = std::filesystem;

// Execs `kcache` (beside this binary) with this process's argv: argv[0] stays, so a masquerade
// name means the same there. Returns only when it cannot (127).
int HandToKcache(char** argv) {
  kcache::launch::ClearInsideMark();
  std::string kcache = (fs::path(kcache::launch::SelfExe()).parent_path() / "kcache").string();
  execv(kcache.c_str(), argv);
  std::fprintf(stderr, "kcache: cannot run %s: %s\n", kcache.c_str(), std::strerror(errno));
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  if (!kcache::launch::IsLauncherInvocation(argc, argv)) return HandToKcache(argv);
  absl::StatusOr<kcache::launch::LaunchCommand> command =
      kcache::launch::ParseLaunchCommand(argc, argv);
  if (!command.ok()) return HandToKcache(argv);  // kcache says what is wrong
  kcache::objects::LauncherOptions options = kcache::launch::LauncherOptionsFromEnvironment();
  if (std::optional<int> passed = kcache::launch::PassThroughInsideACompile(options, *command)) {
    return *passed;
  }
  const char* server = std::getenv("KCACHE_SERVER");
  std::shared_ptr<kcache::client::FastPath> fast =
      kcache::launch::FastPathTo(server == nullptr ? "" : server);
  if (fast == nullptr) return HandToKcache(argv);
  options.open_cache = [fast]() -> absl::StatusOr<std::unique_ptr<kcache::objects::ObjectCache>> {
    return kcache::launch::NewFastObjectCache(fast);
  };
  options.note_uncached = kcache::launch::UncachedNotes(fast);
  options.hand_off = [argv] { return HandToKcache(argv); };
  return kcache::objects::RunLauncher(options, kcache::objects::FamilyOfCompiler(command->compiler),
                                      command->compiler, command->args);
}
