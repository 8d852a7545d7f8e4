#include "client/cli/launcher_commands.h"

#include <sys/wait.h>
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
#include "client/cli/child_process.h"
#include "client/cli/commands.h"
#include "client/cli/compile_turn_remote.h"
#include "client/cli/compiler_shims.h"
#include "client/cli/nvrtc_any_directory.h"
#include "client/cli/nvrtc_clock_probe.h"
#include "client/cli/object_remote.h"
#include "client/cli/output.h"
#include "client/cli/run_cache_dirs.h"
#include "client/cli/run_check.h"
#include "client/cli/run_environment.h"
#include "client/cli/server_connect.h"
#include "client/cli/torch_compile_env.h"
#include "client/launch/cache_budget.h"
#include "client/launch/fast_object_cache.h"
#include "client/launch/handed_miss_memfd.h"
#include "client/launch/launch_command.h"
#include "core/environment.h"
#include "core/file_io.h"
#include "core/run_process.h"
#include "engine/keys/file_digests.h"
#include "engine/keys/header_manifest.h"
#include "engine/launcher/launcher.h"
#include "engine/nvrtc/nvrtc_compile.h"
#include "engine/objects/object_bundle.h"
#include "engine/objects/object_wire.h"
#include "engine/objects/store_object_cache.h"
#include "engine/store/store.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

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
// from `budget` (the command's: client/launch/cache_budget.h). `handed`: the record
// kcache-launch handed this command over with (client/launch/handed_miss_memfd.h), or null.
objects::LauncherOptions LauncherOptionsFromEnv(std::shared_ptr<launch::CacheBudget> budget,
                                                const objects::HandedMiss* handed = nullptr) {
  objects::LauncherOptions options = launch::LauncherOptionsFromEnvironment();
  std::string store_dir = EnvValue("KCACHE_STORE"), server = EnvValue("KCACHE_SERVER");
  // Launcher commands run uncached are counted by kcached when its fast path is there (the
  // object cache itself stays gRPC's here: this binary stores).
  if (std::shared_ptr<client::FastPath> fast = launch::FastPathTo(server)) {
    options.note_uncached = launch::UncachedNotes(std::move(fast), budget);
  }
  // One compile per miss among kcached's launchers (and its fleet's): wait for another's.
  if (!server.empty()) {
    options.await_turn = [server, budget](const CommandKey& key1,
                                          const std::vector<std::string>& listed,
                                          const std::string& subject) {
      return AwaitRemoteTurn(server, budget, key1, listed, subject);
    };
  }
  launch::ListedSizes listed;  // the handed lookup's entries to fetch
  if (handed != nullptr) {
    listed.Note(handed->fetch);
    options.handed = handed;
  }
  options.open_cache = [store_dir, server, budget,
                        listed]() -> absl::StatusOr<std::unique_ptr<objects::ObjectCache>> {
    if (!server.empty()) return OpenRemoteObjectCache(server, budget, listed);
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
  return launch::CacheBudget::FromEnvironment(EnvValue("KCACHE_SERVER"),
                                              EnvValue("KCACHE_LOG") == "1");
}

// Prints each note of `routing` on stderr.
void PrintNotes(const Routing& routing) {
  for (const std::string& note : routing.notes) std::fprintf(stderr, "kcache: %s\n", note.c_str());
}

// `value` as one word for a POSIX shell.
std::string ShellQuoted(const std::string& value) {
  if (!value.empty() &&
      value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                              "_-+=/.,:@%") == std::string::npos) {
    return value;
  }
  return absl::StrCat("'", absl::StrReplaceAll(value, {{"'", "'\\''"}}), "'");
}

// Why the kcached that `env`'s KCACHE_SERVER names does not answer a Stat within 2 s; "" when it
// does, or none is named.
std::string ServerSilence(const objects::Environment& env) {
  auto server = env.find("KCACHE_SERVER");
  if (server == env.end() || server->second.empty()) return "";
  absl::StatusOr<std::unique_ptr<client::Client>> client = ConnectForCli(server->second, 2.0);
  if (!client.ok()) return std::string(client.status().message());
  absl::StatusOr<client::DaemonStats> stats = (*client)->Stat();
  return stats.ok() ? "" : std::string(stats.status().message());
}

// `kcache nvrtc-get`: the entries KCACHE_STORE holds under each command key on standard input
// (32 bytes each, at most kMaxNvrtcGetKeys), with their bundles (objects::AppendHandedEntry), on
// standard output: what the NVRTC stand-in of a process with a store and no kcached checks and
// serves. At most kMaxNvrtcGetEntries a key and kMaxNvrtcGetAnswer bytes in all; a store that
// does not open is no entries (a miss).
int GetNvrtcEntries() {
  absl::StatusOr<std::string> input =
      ReadToEnd(STDIN_FILENO, objects::kMaxNvrtcGetKeys * CommandKey::kSize);
  if (!input.ok() || input->empty() || input->size() % CommandKey::kSize != 0) {
    return Fail(
        absl::StrCat("kcache nvrtc-get: standard input must be 1 to ", objects::kMaxNvrtcGetKeys,
                     " command keys of ", CommandKey::kSize, " bytes"),
        kExitBadInput);
  }
  std::string store_dir = EnvValue("KCACHE_STORE");
  if (store_dir.empty()) return Fail("kcache nvrtc-get: KCACHE_STORE is not set", kExitBadInput);
  const bool log = EnvValue("KCACHE_LOG") == "1";
  absl::StatusOr<std::unique_ptr<Store>> store = OpenLauncherStoreToRead(store_dir);
  if (!store.ok()) {
    if (log) {
      std::fprintf(stderr, "kcache: nvrtc: no lookup in %s: %s\n", store_dir.c_str(),
                   std::string(store.status().message()).c_str());
    }
    return kExitOk;
  }
  std::unique_ptr<objects::ObjectCache> cache =
      objects::NewOwningStoreObjectCache(*std::move(store));
  std::string answer;
  for (size_t at = 0; at < input->size(); at += CommandKey::kSize) {
    CommandKey key1 =
        *CommandKey::FromBytes(absl::string_view(*input).substr(at, CommandKey::kSize));
    absl::StatusOr<std::vector<ObjectEntry>> entries = cache->List(key1);
    if (!entries.ok()) continue;
    size_t taken = 0;
    for (const ObjectEntry& entry : *entries) {
      if (taken == objects::kMaxNvrtcGetEntries) break;
      absl::StatusOr<std::string> bundle = cache->Get(entry.key);
      if (!bundle.ok() || answer.size() + bundle->size() > objects::kMaxNvrtcGetAnswer) continue;
      objects::AppendHandedEntry(answer, entry, *bundle);
      ++taken;
    }
  }
  if (absl::Status written = WriteFull(STDOUT_FILENO, answer); !written.ok()) return kExitFailed;
  return kExitOk;
}

// `kcache nvrtc-put`: stores the NVRTC compile kcache's stand-in handed over on standard input
// (client/nvrtc/nvrtc_cache.cc HandToKcache: the compile framed, objects::DecodeHandedEntry),
// where this process's launchers put their objects, once compiled again here it is shown not to
// depend on the clock (nvrtc_clock_probe.h; else it is not stored): under the key for any
// directory when its program is named in one that does not reach the output
// (nvrtc_any_directory.h), else as handed. kExitBadInput for input that is not one.
int PutHandedNvrtcCompile() {
  absl::StatusOr<std::string> input =
      ReadToEnd(STDIN_FILENO, objects::kDefaultMaxObjectBytes + (uint64_t{16} << 20));
  if (absl::IsResourceExhausted(input.status())) {
    return Fail("kcache nvrtc-put: the input is too large", kExitBadInput);
  }
  if (!input.ok()) {
    return Fail(absl::StrCat("kcache nvrtc-put: standard input: ", input.status().message()),
                kExitFailed);
  }
  absl::string_view rest = *input, compile;
  if (!objects::TakeFramed(rest, &compile)) {
    return Fail("kcache nvrtc-put: the input is not a handed NVRTC compile", kExitBadInput);
  }
  absl::StatusOr<std::pair<ObjectEntry, std::string>> handed = objects::DecodeHandedEntry(rest);
  if (!handed.ok()) {
    return Fail(absl::StrCat("kcache nvrtc-put: ", handed.status().message()), kExitBadInput);
  }
  auto& [entry, bundle] = *handed;
  absl::StatusOr<std::pair<objects::NvrtcProgram, objects::NvrtcContext>> decoded =
      objects::DecodeNvrtcCompile(compile);
  if (!decoded.ok()) {
    return Fail(absl::StrCat("kcache nvrtc-put: ", decoded.status().message()), kExitBadInput);
  }
  const auto& [program, context] = *decoded;
  absl::StatusOr<objects::ObjectBundleView> view = objects::DecodeBundleView(bundle);
  absl::StatusOr<objects::NvrtcOutcome> outcome =
      view.ok() ? objects::DecodeNvrtcOutcome(view->object, program.name_expressions.size())
                : absl::StatusOr<objects::NvrtcOutcome>(view.status());
  if (!outcome.ok()) {
    return Fail(absl::StrCat("kcache nvrtc-put: ", outcome.status().message()), kExitBadInput);
  }
  const bool log = EnvValue("KCACHE_LOG") == "1";
  // Checked as handed (its paths relative to the working directory), also once `entry` has moved
  // to the key for any directory, whose manifest names the program's directory as "@base1@".
  const HeaderManifest handed_manifest = entry.manifest;
  auto unchanged = [&] {
    objects::FileDigests digests("");
    std::string difference;
    if (objects::ManifestMatches(handed_manifest, objects::NvrtcDirs(context),
                                 objects::CurrentEnvironment(), digests, &difference)) {
      return true;
    }
    if (log) {
      std::fprintf(stderr,
                   "kcache: nvrtc: not stored: what the compile read changed before kcache "
                   "could compile it again (%s)\n",
                   difference.c_str());
    }
    return false;
  };
  if (!unchanged()) return kExitOk;
  if (absl::Status clock = CheckNvrtcClockFree(program, context, *outcome); !clock.ok()) {
    if (log) {
      std::fprintf(stderr, "kcache: nvrtc: not stored: %s\n", std::string(clock.message()).c_str());
    }
    return kExitOk;
  }
  std::string how;  // said with KCACHE_LOG=1
  if (objects::NvrtcNameDirectoryOf(program.name, context.cwd)) {
    absl::StatusOr<ObjectEntry> moved = AnyDirectoryEntry(entry, *outcome, program, context);
    if (moved.ok()) {
      entry = *std::move(moved);
      how = ", for its program's name in any directory";
    } else {
      how = absl::StrCat(", for its program's name only: ", moved.status().message());
    }
  }
  if (!unchanged()) return kExitOk;  // compiled again from other inputs than the caller's
  objects::LauncherOptions options = LauncherOptionsFromEnv(BudgetFromEnv());
  absl::StatusOr<std::unique_ptr<objects::ObjectCache>> cache = options.open_cache();
  if (!cache.ok()) return Fail(cache.status().message(), kExitFailed);
  absl::Status put = (*cache)->Put(entry, bundle);
  if (!put.ok()) return Fail(absl::StrCat("kcache nvrtc-put: ", put.message()), kExitFailed);
  if (log) {
    std::fprintf(stderr, "kcache: nvrtc: stored %s (%zu bytes%s)\n", entry.key.ToString().c_str(),
                 bundle.size(), how.c_str());
  }
  return kExitOk;
}

}  // namespace

// How long a launcher waits for a store directory another launcher holds.
constexpr auto kStoreLockWait = std::chrono::seconds(120);

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

namespace {

// `kcache run` with the cache directories: each served before `command` runs (in this
// process's environment, routed already) as kcache's child, and captured once it exits 0;
// the command's exit code, or its signal raised.
int RunServingCacheDirs(const RoutingFlags& routing, RunCacheDirsFlags flags,
                        const std::vector<std::string>& command) {
  flags.arch = routing.arch;
  flags.store = routing.store;
  flags.server = routing.server;
  auto plan = [&]() -> std::vector<PlannedDir> {
    absl::StatusOr<std::vector<PlannedDir>> planned =
        PlanCacheDirs(launch::LauncherOptionsFromEnvironment().lookup, flags, command);
    if (!planned.ok()) {
      std::fprintf(stderr, "kcache: cache directories neither served nor captured: %s\n",
                   std::string(planned.status().message()).c_str());
      return {};
    }
    return *std::move(planned);
  };
  auto open = [&](bool lookups) -> std::unique_ptr<objects::ObjectCache> {
    absl::StatusOr<std::unique_ptr<objects::ObjectCache>> cache = OpenSnapshotCache(flags, lookups);
    if (!cache.ok()) {
      std::fprintf(stderr, "kcache: cache directories: %s\n",
                   std::string(cache.status().message()).c_str());
      return nullptr;
    }
    return *std::move(cache);
  };
  // The store is closed while the command runs: its launchers open it. A store directory is
  // opened once for both (a second open would wait for the first's lock).
  std::vector<ServedCacheDir> served;
  if (std::vector<PlannedDir> planned = plan(); !planned.empty()) {
    std::unique_ptr<objects::ObjectCache> transfers = open(false);
    std::unique_ptr<objects::ObjectCache> lookups = flags.server.empty() ? nullptr : open(true);
    if (transfers != nullptr) {
      served = ServeCacheDirs(lookups != nullptr ? *lookups : *transfers, *transfers, planned,
                              flags.limits);
    }
  }
  absl::StatusOr<int> status = RunChild(command);
  if (!status.ok()) return Fail(status.status().message(), 127);
  ReportCacheDirUse(served, flags.report, flags.limits);
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) {
    // Keyed again: the command may have installed what the keys name.
    if (std::vector<PlannedDir> planned = plan(); !planned.empty()) {
      if (std::unique_ptr<objects::ObjectCache> cache = open(false)) {
        CaptureCacheDirs(*cache, planned, flags.limits);
      }
    }
  } else if (!EnvValue("KCACHE_LOG").empty()) {
    std::fprintf(stderr, "kcache: cache directories not captured: the command did not exit 0\n");
  }
  return ExitLike(*status);
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
  // First: the record's variable and descriptor are never the compiler's processes'.
  absl::StatusOr<objects::HandedMiss> handed = launch::TakeHandedMiss(argv);
  absl::StatusOr<launch::LaunchCommand> command = launch::ParseLaunchCommand(argc, argv);
  if (!command.ok()) return Fail(command.status().message(), kExitBadInput);
  std::shared_ptr<launch::CacheBudget> budget = BudgetFromEnv();
  objects::LauncherOptions options =
      LauncherOptionsFromEnv(budget, handed.ok() ? &*handed : nullptr);
  if (!handed.ok() && !absl::IsNotFound(handed.status()) && options.log) {
    std::fprintf(stderr, "kcache: handed-over record not used (%s): keying and looking up again\n",
                 std::string(handed.status().message()).c_str());
  }
  if (std::optional<int> passed = launch::PassThroughInsideACompile(options, *command)) {
    return *passed;
  }
  if (!EnvValue("KCACHE_SERVER").empty() && budget->CompileWithoutAsking()) {
    return launch::ExecRealCompiler(options, *command);
  }
  return objects::RunLauncher(options, objects::FamilyOfCompiler(command->compiler),
                              command->compiler, command->args);
}

namespace {

// kcache run: the command with every compiler it starts served by kcache.
void RegisterRunCommand(CLI::App& app, int* exit_code) {
  static RoutingFlags run_flags;
  static std::vector<std::string> run_command;
  static bool run_check = false;
  static RunCacheDirsFlags run_dirs;
  CLI::App* run = app.add_subcommand(
      "run",
      "run COMMAND with every nvcc and host compiler it starts served by kcache "
      "(torch.utils.cpp_extension, FlashInfer, DeepGEMM, CMake, setup.py, make): sets PATH, "
      "CUDA_HOME, the compiler and launcher variables (docs/jit-libraries.md); NVRTC inside it "
      "is kcache's libnvrtc.so.13 stand-in, forwarding to the real one (docs/nvrtc-standin.md)");
  AddRoutingFlags(run, run_flags);
  run->add_flag("--check", run_check,
                "run nothing: say which compiler each way of finding one reaches under that "
                "environment, and through what (exit 1 when one bypasses kcache)");
  run->add_flag("--no-cache-dirs", run_dirs.off,
                "neither serve nor capture the libraries' cache directories, as "
                "KCACHE_CACHE_DIRS=0 (docs/cache-dirs.md)");
  run->add_flag("--report", run_dirs.report,
                "after the command, say per library what became of the files served into its "
                "cache directory: kept as served, replaced, removed, written anew (a directory "
                "the library did not use is said without it too)");
  run->add_option("--cache-dir-max-files", run_dirs.limits.max_files,
                  "files one cache directory's snapshot may hold, served or captured; past it "
                  "the rest are left out, said so")
      ->check(CLI::Range(uint64_t{1}, uint64_t{10000000}))
      ->capture_default_str();
  run->add_option("--cache-dir-max-file-bytes", run_dirs.limits.max_file_bytes,
                  "largest file a snapshot takes (e.g. 2GiB); a larger one is left out, said so")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  run->add_option("--cache-dir-max-bytes", run_dirs.limits.max_total_bytes,
                  "bytes one cache directory's snapshot may hold (e.g. 8GiB); past it the rest "
                  "are left out, said so")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  run->add_option("--cache-dir", run_dirs.user_dirs,
                  "a cache directory of your own, served and captured as the table's: "
                  "NAME=DIR[:PREFIX,...] (DIR absolute; variables with a PREFIX are keyed); "
                  "repeatable");
  run->add_option("command", run_command, "the command, after --");
  run->callback([exit_code] {
    if (run_command.empty() && !run_check) {
      *exit_code =
          Fail("kcache run needs a command: kcache run --store DIR -- COMMAND...", kExitBadInput);
      return;
    }
    objects::ToolLookup current = launch::LauncherOptionsFromEnvironment().lookup;
    absl::StatusOr<Routing> routing = RoutingEnvironment(run_flags, current);
    if (!routing.ok()) {
      *exit_code = Fail(routing.status().message(), kExitBadInput);
      return;
    }
    PrintNotes(*routing);
    if (run_check) {
      objects::ToolLookup routed = current;
      routed.env = Routed(current, *routing);
      RouteReport report = CheckRoutes(routed, run_command, ServerSilence(routed.env));
      std::printf("%s", report.text.c_str());
      *exit_code = report.all_through ? kExitOk : kExitFailed;
      return;
    }
    if (!run_flags.server.empty())
      launch::TellCudaStandInStart(run_flags.server, routing->cuda_stand_in);
    for (const auto& [name, value] : routing->env) setenv(name.c_str(), value.c_str(), 1);
    if (!run_dirs.off && EnvValue("KCACHE_CACHE_DIRS") != "0") {
      *exit_code = RunServingCacheDirs(run_flags, run_dirs, run_command);
      return;
    }
    std::vector<char*> argv;
    for (std::string& arg : run_command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    *exit_code = Fail(absl::StrCat("cannot run ", run_command[0], ": ", std::strerror(errno)), 127);
  });
}

// kcache env: the environment kcache run would set.
void RegisterEnvCommand(CLI::App& app, int* exit_code) {
  static RoutingFlags env_flags;
  static bool env_export = false;
  CLI::App* env = app.add_subcommand(
      "env",
      "print the environment `kcache run` would set, one NAME=VALUE a line (for a "
      "Dockerfile ENV, a pod spec, or a shell with --export)");
  AddRoutingFlags(env, env_flags);
  env->add_flag("--export", env_export,
                "print `export NAME=VALUE` lines, each value quoted for the shell (for eval)");
  env->callback([exit_code] {
    absl::StatusOr<Routing> routing =
        RoutingEnvironment(env_flags, launch::LauncherOptionsFromEnvironment().lookup);
    if (!routing.ok()) {
      *exit_code = Fail(routing.status().message(), kExitBadInput);
      return;
    }
    PrintNotes(*routing);
    for (const auto& [name, value] : routing->env) {
      if (env_export) {
        std::printf("export %s=%s\n", name.c_str(), ShellQuoted(value).c_str());
      } else {
        std::printf("%s=%s\n", name.c_str(), value.c_str());
      }
    }
    *exit_code = kExitOk;
  });
}

// kcache nvrtc-put and nvrtc-get: the NVRTC stand-in's helpers, hidden from --help.
void RegisterNvrtcHelperCommands(CLI::App& app, int* exit_code) {
  CLI::App* nvrtc_put = app.add_subcommand(
      "nvrtc-put",
      "store an NVRTC compile handed over on standard input by kcache's NVRTC stand-in "
      "(docs/nvrtc-standin.md); run by it, not by hand");
  nvrtc_put->group("");
  nvrtc_put->callback([exit_code] { *exit_code = PutHandedNvrtcCompile(); });

  CLI::App* nvrtc_get = app.add_subcommand(
      "nvrtc-get",
      "answer kcache's NVRTC stand-in, in a process with KCACHE_STORE and no kcached, with the "
      "store's entries under the command keys on standard input (docs/nvrtc-standin.md); run by "
      "it, not by hand");
  nvrtc_get->group("");
  nvrtc_get->callback([exit_code] { *exit_code = GetNvrtcEntries(); });
}

// kcache explain: whether a compile would hit, and if not what differs.
void RegisterExplainCommand(CLI::App& app, int* exit_code) {
  static std::vector<std::string> explain_command;
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
    // A build under `kcache run` read the environment kcache run gave it (PATH's shims first,
    // its variables): from a shell without it, the first difference found may be that
    // environment (a variable, the compiler PATH finds), not the build's.
    if (absl::StartsWith(answer, "miss:") &&
        !NamesKcache(FindProgram("c++", options.lookup), options.lookup)) {
      absl::StrAppend(&answer,
                      "\n  (this shell's environment is not the one `kcache run` gives its "
                      "command: if the build ran under kcache run, compare as it ran with "
                      "`kcache run` and the build's flags -- kcache explain -- ",
                      compiler, " ...)");
    }
    std::printf("%s\n", answer.c_str());
    *exit_code = absl::StartsWith(answer, "error:") ? kExitFailed : kExitOk;
  });
}

}  // namespace

void RegisterLauncherCommands(CLI::App& app, int* exit_code) {
  RegisterRunCommand(app, exit_code);
  RegisterEnvCommand(app, exit_code);
  RegisterNvrtcHelperCommands(app, exit_code);
  RegisterExplainCommand(app, exit_code);
}

}  // namespace kcache::cli
