// kcache-launch: the compiler launcher that masquerade links (nvcc, c++, cc, ...) point at.
// It serves a hit through kcached's fast path (KCACHE_SERVER a unix socket) without loading
// gRPC, RocksDB or the rest of `kcache`: a process start of a few milliseconds instead of
// ~16. A command it cannot serve that way (a miss, a store directory, a TCP address, no fast
// socket) is handed to `kcache` beside it, unchanged, with what is left of the command's time
// for kcached (cache_budget.h); uncached commands run the real compiler here, as `kcache`
// would, and so do all while kcached is marked unresponsive.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "client/launch/cache_budget.h"
#include "client/launch/fast_object_cache.h"
#include "client/launch/handed_miss_memfd.h"
#include "client/launch/handed_miss_record.h"
#include "client/launch/launch_command.h"
#include "core/environment.h"

namespace {

namespace fs = std::filesystem;

// Execs `kcache` (beside this binary) with this process's argv: argv[0] stays, so a masquerade
// name means the same there; `made`, when given, is what this process made of the command
// (handed_miss.h: kcache then neither keys nor lists it again). Returns only when it cannot
// (127).
int HandToKcache(char** argv, const kcache::objects::HandedMiss* made = nullptr, bool log = false) {
  kcache::launch::ClearInsideMark();
  unsetenv(kcache::launch::kHandedMissEnv);
  if (made != nullptr) {
    // Without the record kcache does the full pass: slower, as correct.
    if (absl::Status handed = kcache::launch::HandOnMiss(*made, argv); !handed.ok()) {
      if (log) {
        std::fprintf(stderr, "kcache: not handed over (%s)\n",
                     std::string(handed.message()).c_str());
      }
    }
  }
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
  std::string server = kcache::EnvValue("KCACHE_SERVER");
  // The command's time for kcached, here and in the kcache it may be handed to.
  std::shared_ptr<kcache::launch::CacheBudget> budget =
      kcache::launch::CacheBudget::FromEnvironment(server, options.log);
  if (!server.empty() && budget->CompileWithoutAsking()) {
    return kcache::launch::ExecRealCompiler(options, *command);
  }
  std::shared_ptr<kcache::client::FastPath> fast = kcache::launch::FastPathTo(server);
  if (fast == nullptr) {
    budget->HandOn();
    return HandToKcache(argv);
  }
  options.open_cache = [fast,
                        budget]() -> absl::StatusOr<std::unique_ptr<kcache::objects::ObjectCache>> {
    return kcache::launch::NewFastObjectCache(fast, budget);
  };
  options.note_uncached = kcache::launch::UncachedNotes(fast, budget);
  options.hand_off = [argv, budget, &options, &command](const kcache::objects::HandedMiss& made) {
    if (!budget->timed_out()) {
      budget->HandOn();
      return HandToKcache(argv, &made, options.log);
    }
    // kcached did not answer: kcache would not ask it either, and would not store.
    budget->LogCompilingUncached();
    return kcache::launch::ExecRealCompiler(options, *command);
  };
  return kcache::objects::RunLauncher(options, kcache::objects::FamilyOfCompiler(command->compiler),
                                      command->compiler, command->args);
}
