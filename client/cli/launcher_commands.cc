#include "client/cli/launcher_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/cli/object_remote.h"
#include "client/cli/output.h"
#include "client/cli/torch_compile_env.h"
#include "client/launch/cache_budget.h"
#include "client/launch/fast_object_cache.h"
#include "client/launch/launch_command.h"
#include "engine/objects/launcher.h"
#include "engine/objects/run_process.h"
#include "engine/store/store.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

// How long a launcher waits for a store directory another launcher holds.
constexpr auto kStoreLockWait = std::chrono::seconds(120);

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// Opens the store directory for a launcher, waiting while another launcher holds it; a store
// that cannot be written (a baked, read-only one) is opened read-only.
absl::StatusOr<std::unique_ptr<Store>> OpenLauncherStore(const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + kStoreLockWait;
  while (true) {
    StoreOptions options;
    options.rocksdb_log = false;
    options.open_files_lazily = true;
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path, options);
    if (absl::IsPermissionDenied(store.status()) || absl::IsInvalidArgument(store.status())) {
      options.read_only = true;
      return OpenStore(path, options);
    }
    if (!absl::IsFailedPrecondition(store.status()) ||
        std::chrono::steady_clock::now() > deadline) {
      return store;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + getpid() % 20));
  }
}

// Opens the store directory for a lookup: read-only (no lock to wait for, nothing written);
// as for a write when it does not open so (absent, or changing under a writer).
absl::StatusOr<std::unique_ptr<Store>> OpenLauncherStoreToRead(const std::string& path) {
  StoreOptions options;
  options.rocksdb_log = false;
  options.open_files_lazily = true;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path, options);
  return store.ok() ? std::move(store) : OpenLauncherStore(path);
}

// The launchers' options from the environment, their caches taking their time for kcached
// from `budget` (the command's: client/launch/cache_budget.h).
objects::LauncherOptions LauncherOptionsFromEnv(std::shared_ptr<launch::CacheBudget> budget) {
  objects::LauncherOptions options = launch::LauncherOptionsFromEnvironment();
  std::string store_dir = Env("KCACHE_STORE"), server = Env("KCACHE_SERVER");
  // Launcher commands run uncached are counted by kcached when its fast path is there (the
  // object cache itself stays gRPC's here: this binary stores).
  if (std::shared_ptr<client::FastPath> fast = launch::FastPathTo(server)) {
    options.note_uncached = launch::UncachedNotes(std::move(fast), budget);
  }
  options.open_cache = [store_dir, server,
                        budget]() -> absl::StatusOr<std::unique_ptr<objects::ObjectCache>> {
    if (!server.empty()) return OpenRemoteObjectCache(server, budget);
    if (store_dir.empty()) {
      return absl::FailedPreconditionError("neither KCACHE_STORE nor KCACHE_SERVER is set");
    }
    absl::StatusOr<std::unique_ptr<Store>> store = OpenLauncherStore(store_dir);
    if (!store.ok()) return store.status();
    return objects::NewOwningStoreObjectCache(std::move(*store));
  };
  if (server.empty() && !store_dir.empty()) {
    options.open_cache_to_read =
        [store_dir]() -> absl::StatusOr<std::unique_ptr<objects::ObjectCache>> {
      absl::StatusOr<std::unique_ptr<Store>> store = OpenLauncherStoreToRead(store_dir);
      if (!store.ok()) return store.status();
      return objects::NewOwningStoreObjectCache(std::move(*store));
    };
  }
  return options;
}

// The budget of a command of this process's, for KCACHE_SERVER (a store directory spends none).
std::shared_ptr<launch::CacheBudget> BudgetFromEnv() {
  return launch::CacheBudget::FromEnvironment(Env("KCACHE_SERVER"), Env("KCACHE_LOG") == "1");
}

// Creates (or refreshes) the masquerade links in `dir`, each pointing at kcache-launch beside
// this binary (at this binary when there is none).
absl::Status MakeShims(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::string self = launch::SelfExe();
  fs::path launcher = fs::path(self).parent_path() / launch::kLaunchBinary;
  if (fs::exists(launcher, ec)) self = launcher.string();
  for (const char* name : launch::kCompilerNames) {
    fs::path link = fs::path(dir) / name;
    std::string tmp = absl::StrCat(link.string(), ".", getpid());
    fs::remove(tmp, ec);
    fs::create_symlink(self, tmp, ec);
    if (!ec) fs::rename(tmp, link, ec);
    if (ec)
      return absl::FailedPreconditionError(
          absl::StrCat("cannot link ", link.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

// What a --redis without an address becomes (ArgsForParse): a flag of its own, since CLI11
// would take a `--` after an option with an optional value as the end of that value.
constexpr char kRedisFromKcached[] = "--redis-from-kcached";

struct RoutingFlags {
  std::string store, server, arch, shims, base_dirs, redis;
  bool no_triton = false;
  bool redis_from_kcached = false;  // --redis without an address (ArgsForParse)
};

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
  sub->add_option("--arch", flags.arch,
                  "TORCH_CUDA_ARCH_LIST for the command, comma-separated, e.g. 7.5,8.6,8.9,9.0");
  sub->add_option("--shims", flags.shims,
                  "directory of the masquerade links (nvcc, c++, cc, ...); default "
                  "$KCACHE_STATE_DIR/shims (~/.cache/kcache/shims)");
  sub->add_option("--base-dir", flags.base_dirs,
                  "colon-separated directories whose paths are keyed relative to them (besides "
                  "the build directory), e.g. the source tree; KCACHE_BASEDIR");
}

// The masquerade name for `generic` (c++, cc): GCC's own (g++, gcc) when both name the same
// compiler in PATH. Tools tell GCC by its --version line, which says the name it was run by:
// Inductor names its precompiled header .gch only for a compiler it sees as GCC, and GCC
// reads no other.
std::string CompilerName(const std::string& generic, const std::string& gnu) {
  objects::LauncherOptions options = LauncherOptionsFromEnv(BudgetFromEnv());
  absl::StatusOr<std::string> plain = objects::FindCompiler(generic, options.lookup);
  absl::StatusOr<std::string> named = objects::FindCompiler(gnu, options.lookup);
  if (!plain.ok() || !named.ok()) return generic;
  std::error_code ec;
  return fs::equivalent(*plain, *named, ec) && !ec ? gnu : generic;
}

// The environment `kcache run` sets and `kcache env` prints, in order.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> RoutingEnvironment(
    const RoutingFlags& flags) {
  if (flags.store.empty() == flags.server.empty()) {
    return absl::InvalidArgumentError("give exactly one of --store DIR and --server ADDR");
  }
  std::string shims =
      flags.shims.empty() ? absl::StrCat(launch::StateDir(), "/shims") : flags.shims;
  if (absl::Status made = MakeShims(shims); !made.ok()) return made;
  std::vector<std::pair<std::string, std::string>> env;
  if (!flags.store.empty()) {
    std::error_code ec;
    env.emplace_back("KCACHE_STORE", fs::absolute(flags.store, ec).lexically_normal().string());
  } else {
    env.emplace_back("KCACHE_SERVER", flags.server);
  }
  env.emplace_back("PYTORCH_NVCC", absl::StrCat(shims, "/nvcc"));
  env.emplace_back("CXX", absl::StrCat(shims, "/", CompilerName("c++", "g++")));
  env.emplace_back("CC", absl::StrCat(shims, "/", CompilerName("cc", "gcc")));
  // torch puts ccache or sccache in front of $CXX when one is on PATH: kcache is the cache.
  env.emplace_back("TORCH_NO_COMPILER_WRAPPER", "1");
  if (!flags.arch.empty()) {
    env.emplace_back("TORCH_CUDA_ARCH_LIST", absl::StrReplaceAll(flags.arch, {{",", ";"}}));
  }
  if (!flags.base_dirs.empty()) env.emplace_back("KCACHE_BASEDIR", flags.base_dirs);
  if (flags.no_triton && flags.redis.empty() && !flags.redis_from_kcached) {
    return absl::InvalidArgumentError("--no-triton goes with --redis");
  }
  if (!flags.redis.empty() || flags.redis_from_kcached) {
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
    env.insert(env.end(), compile->begin(), compile->end());
  }
  return env;
}

}  // namespace

std::vector<std::string> ArgsForParse(int argc, char** argv) {
  std::vector<std::string> args;
  bool after_dashes = false;  // the command's own arguments are left alone
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!after_dashes && arg == "--redis" && (i + 1 == argc || argv[i + 1][0] == '-')) {
      arg = kRedisFromKcached;  // no address follows: ask kcached
    }
    after_dashes = after_dashes || arg == "--";
    args.push_back(std::move(arg));
  }
  std::reverse(args.begin(), args.end());
  return args;
}

bool IsLauncherInvocation(int argc, char** argv) {
  return launch::IsLauncherInvocation(argc, argv);
}

int RunLauncherCli(int argc, char** argv) {
  absl::StatusOr<launch::LaunchCommand> command = launch::ParseLaunchCommand(argc, argv);
  if (!command.ok()) return Fail(command.status().message(), kExitBadInput);
  std::shared_ptr<launch::CacheBudget> budget = BudgetFromEnv();
  objects::LauncherOptions options = LauncherOptionsFromEnv(budget);
  if (std::optional<int> passed = launch::PassThroughInsideACompile(options, *command)) {
    return *passed;
  }
  if (!Env("KCACHE_SERVER").empty() && budget->CompileWithoutAsking()) {
    return launch::ExecRealCompiler(options, *command);
  }
  return objects::RunLauncher(options, objects::FamilyOfCompiler(command->compiler),
                              command->compiler, command->args);
}

void RegisterLauncherCommands(CLI::App& app, int* exit_code) {
  static RoutingFlags run_flags, env_flags;
  static std::vector<std::string> run_command, explain_command;
  static bool env_export = false;

  CLI::App* run = app.add_subcommand(
      "run",
      "run COMMAND with its compiles (torch.utils.cpp_extension, CMake) served by kcache: "
      "sets KCACHE_STORE or KCACHE_SERVER, PYTORCH_NVCC, CXX, CC and TORCH_CUDA_ARCH_LIST");
  AddRoutingFlags(run, run_flags);
  run->add_option("command", run_command, "the command, after --")->required();
  run->callback([exit_code] {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> env =
        RoutingEnvironment(run_flags);
    if (!env.ok()) {
      *exit_code = Fail(env.status().message(), kExitBadInput);
      return;
    }
    for (const auto& [name, value] : *env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (std::string& arg : run_command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    *exit_code = Fail(absl::StrCat("cannot run ", run_command[0], ": ", std::strerror(errno)), 127);
  });

  CLI::App* env = app.add_subcommand(
      "env",
      "print the environment `kcache run` would set, one NAME=VALUE a line (for a "
      "Dockerfile ENV, a pod spec, or a shell with --export)");
  AddRoutingFlags(env, env_flags);
  env->add_flag("--export", env_export, "prefix each line with `export ` (for a shell's eval)");
  env->callback([exit_code] {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> vars =
        RoutingEnvironment(env_flags);
    if (!vars.ok()) {
      *exit_code = Fail(vars.status().message(), kExitBadInput);
      return;
    }
    for (const auto& [name, value] : *vars) {
      std::printf("%s%s=%s\n", env_export ? "export " : "", name.c_str(), value.c_str());
    }
    *exit_code = kExitOk;
  });

  CLI::App* explain = app.add_subcommand(
      "explain",
      "say whether a compile would hit, and if not which part of its key differs from "
      "the nearest recorded entry for the same source (reads KCACHE_STORE or "
      "KCACHE_SERVER, as the launchers do)");
  explain->add_option("command", explain_command, "the compiler command, after --")->required();
  explain->callback([exit_code] {
    objects::LauncherOptions options = LauncherOptionsFromEnv(BudgetFromEnv());
    std::string compiler = explain_command[0];
    std::vector<std::string> args(explain_command.begin() + 1, explain_command.end());
    std::string answer =
        objects::ExplainCompile(options, objects::FamilyOfCompiler(compiler), compiler, args);
    std::printf("%s\n", answer.c_str());
    *exit_code = absl::StartsWith(answer, "error:") ? kExitFailed : kExitOk;
  });
}

}  // namespace kcache::cli
