#include "engine/launcher/launcher.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/file_io.h"
#include "core/process_identity.h"
#include "core/run_process.h"
#include "engine/keys/file_digests.h"
#include "engine/keys/observed_manifest.h"
#include "engine/launcher/prepared_command.h"
#include "engine/objects/object_bundle.h"

extern char** environ;

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

void Log(const LauncherOptions& options, absl::string_view text) {
  if (options.log) std::fprintf(stderr, "kcache: %s\n", std::string(text).c_str());
}

// The real-time clock file times are taken from (coarse: a jiffy behind the fine one).
absl::Time CoarseNow() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return absl::TimeFromTimespec(now);
}

// A hit: the bundle's bytes, held, and the bundle decoded in place.
struct Hit {
  HeldBytes held;
  ObjectBundleView bundle;
};

// Entry `key`'s bundle, fetched and decoded; nullopt when it is unusable (a corrupt or
// unreadable entry is a miss).
std::optional<Hit> Fetch(const LauncherOptions& options, ObjectCache& cache,
                         const ObjectEntryKey& key) {
  absl::StatusOr<HeldBytes> held = cache.GetHeld(key);
  if (!held.ok()) {
    Log(options, absl::StrCat("entry unusable: ", held.status().message()));
    return std::nullopt;
  }
  absl::StatusOr<ObjectBundleView> bundle = DecodeBundleView(held->bytes);
  if (bundle.ok()) return Hit{*std::move(held), *std::move(bundle)};
  Log(options, absl::StrCat("entry unusable: ", bundle.status().message()));
  return std::nullopt;
}

// The first entry whose manifest matches, fetched and decoded; nullopt on a miss. `*made`
// gets what the lookup found: whether the listing answered, the ids listed, and the entries
// that matched but could not be fetched.
std::optional<Hit> Lookup(const LauncherOptions& options, ObjectCache& cache,
                          const Prepared& prepared, FileDigests& digests, HandedMiss* made) {
  absl::StatusOr<std::vector<ObjectEntry>> entries = cache.List(prepared.key.key1);
  if (!entries.ok()) {
    Log(options, absl::StrCat("lookup failed: ", entries.status().message()));
    return std::nullopt;
  }
  made->looked_up = true;
  for (const ObjectEntry& entry : *entries) made->listed.push_back(entry.key.entry_id);
  for (const ObjectEntry& entry : *entries) {
    if (!ManifestMatches(entry.manifest, prepared.dirs, options.lookup.env, digests, nullptr)) {
      continue;
    }
    if (std::optional<Hit> hit = Fetch(options, cache, entry.key)) return hit;
    made->fetch.push_back(HandedEntry{entry.key.entry_id, entry.size});
  }
  return std::nullopt;
}

// Writes the outputs of a hit; false when one could not be written (then compile instead).
bool WriteOutputs(const Prepared& prepared, const ObjectBundleView& bundle) {
  const CompilerCommand& command = prepared.command;
  if (!WriteFileAtomically(command.output, bundle.object).ok()) return false;
  if (RunsLinker(command.kind)) {  // executable, as the linker leaves it
    mode_t mask = umask(0);
    umask(mask);
    if (chmod(command.output.c_str(), 0777 & ~mask) != 0) return false;
  }
  if (command.writes_deps) {
    DepFile deps;
    // The targets this command's compiler would name: its -MT/-MQ values (keyed, so the ones
    // recorded), else its own -o as written (not keyed: the recording command's may differ, and
    // make would then not know this object depends on the headers).
    if (command.dep_targets_given) {
      for (const std::string& target : bundle.deps.targets) {
        deps.targets.push_back(prepared.dirs.Restore(target));
      }
    } else {
      deps.targets.push_back(command.output);
    }
    for (const std::string& dep : bundle.deps.deps) deps.deps.push_back(prepared.dirs.Restore(dep));
    std::string text = WriteDepFile(deps);
    // -MP: a phony target for each dependency but the source, as the compiler writes them.
    for (size_t i = 1; command.phony_deps && i < deps.deps.size(); ++i) {
      text += WriteDepFile(DepFile{{deps.deps[i]}, {}});
    }
    if (!WriteFileAtomically(command.dep_file, text).ok()) return false;
  }
  return true;
}

int Replay(const Prepared& prepared, const ObjectBundleView& bundle) {
  std::string out = prepared.dirs.Restore(std::string(bundle.stdout_text));
  std::string err = prepared.dirs.Restore(std::string(bundle.stderr_text));
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fwrite(err.data(), 1, err.size(), stderr);
  std::fflush(stdout);
  return bundle.exit_code;
}

// The realpaths of the programs whose reads are a link's inputs: the linker and collect2.
std::vector<std::string> Linkers(const Prepared& prepared) {
  std::vector<std::string> linkers;
  for (const ToolFile& tool : prepared.tools) {
    if (tool.path.empty() || (tool.role != "linker" && tool.role != "collect2")) continue;
    std::error_code ec;
    linkers.push_back(fs::weakly_canonical(tool.path, ec).string());
  }
  return linkers;
}

std::string Absolute(const BaseDirs& dirs, const std::string& path) {
  return !path.empty() && path[0] == '/' ? path : absl::StrCat(dirs.cwd, "/", path);
}

// "N inputs: F files, A paths absent, V variables, O other facts" for KCACHE_LOG.
std::string DescribeManifest(const HeaderManifest& manifest) {
  size_t files = 0, absent = 0, variables = 0;
  for (const auto& [path, value] : manifest) {
    if (!path.empty() && path[0] == '$') {
      ++variables;
    } else if (value == kAbsentFact) {
      ++absent;
    } else if (absl::string_view digest = absl::StripPrefix(value, kResolvesToItselfMark);
               digest.find(':') == absl::string_view::npos ||
               absl::StartsWith(digest, kToolPrefix) ||
               absl::StartsWith(digest, kLinkInputPrefix)) {
      ++files;
    }
  }
  return absl::StrCat(manifest.size(), " inputs: ", files, " files, ", absent, " paths absent, ",
                      variables, " variables, ", manifest.size() - files - absent - variables,
                      " other facts");
}

// Stores a successful compile's outputs, under the manifest of what it was observed to read.
// Failures only mean the next build compiles again: the status says why it was not stored.
absl::Status Store(const LauncherOptions& options, const Prepared& prepared,
                   const Observation& observation, const ProcessResult& result,
                   absl::Time compiled_from, FileDigests& digests) {
  const BaseDirs& dirs = prepared.dirs;
  const CompilerCommand& command = prepared.command;
  absl::StatusOr<std::string> object = ReadWholeFile(command.output);
  absl::StatusOr<std::string> dep_text =
      command.writes_deps ? ReadWholeFile(command.dep_file) : std::string();
  if (!object.ok() || !dep_text.ok()) {
    Log(options, "not stored: the compiler's outputs could not be read");
    return absl::DataLossError("the compiler's outputs could not be read");
  }
  absl::StatusOr<observe::ObservedReads> reads = observation.Read();
  if (!reads.ok()) {
    Log(options, absl::StrCat("not stored (unreadable_input): ", reads.status().message()));
    if (options.note_uncached) options.note_uncached(UncachedReason::kUnreadableInput, "");
    return absl::FailedPreconditionError(UncachedReasonName(UncachedReason::kUnreadableInput));
  }
  ObservedCompile observed;
  observed.dirs = &dirs;
  observed.env = &options.lookup.env;
  observed.temp_dir = observation.temp_dir();
  observed.library = observation.library();
  observed.outputs = {Absolute(dirs, command.output)};
  if (command.writes_deps) observed.outputs.push_back(Absolute(dirs, command.dep_file));
  observed.linkers = Linkers(prepared);
  observed.host_native_keyed = !command.native_args.empty();
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<HeaderManifest> manifest =
      ObservedManifest(*reads, observed, digests, compiled_from, &reason);
  if (!manifest.ok()) {
    Log(options, absl::StrCat("not stored (", UncachedReasonName(reason),
                              "): ", manifest.status().message()));
    if (options.note_uncached) options.note_uncached(reason, "");
    return absl::FailedPreconditionError(UncachedReasonName(reason));
  }
  DepFile deps = ParseDepFile(*dep_text);
  ObjectBundle bundle;
  bundle.object = std::move(*object);
  for (const std::string& target : deps.targets)
    bundle.deps.targets.push_back(dirs.Normalize(target));
  for (const std::string& dep : deps.deps) bundle.deps.deps.push_back(dirs.Normalize(dep));
  bundle.stdout_text = dirs.Normalize(result.stdout_text);
  bundle.stderr_text = dirs.Normalize(result.stderr_text);
  bundle.exit_code = result.exit_code;
  std::string bytes = EncodeBundle(bundle);
  if (absl::Status sized = CheckObjectBytes(bytes.size(), options.max_object_bytes); !sized.ok()) {
    Log(options, absl::StrCat("not stored: ", sized.message()));
    return sized;
  }
  ObjectEntry entry;
  entry.key = ObjectEntryKey::Of(prepared.key.key1, *manifest);
  entry.source = prepared.key.source;
  entry.manifest = std::move(*manifest);
  entry.fields = prepared.key.fields;
  entry.put_by = absl::StrCat(ThisProcessInWords(), " (kcache)");  // kcached puts its own words
  absl::StatusOr<std::unique_ptr<ObjectCache>> cache = options.open_cache();
  absl::Status put = cache.ok() ? (*cache)->Put(entry, bytes) : cache.status();
  if (!put.ok()) {
    Log(options, absl::StrCat("not stored: ", put.message()));
    return put;
  }
  if (options.log) Log(options, absl::StrCat("stored: ", DescribeManifest(entry.manifest)));
  return absl::OkStatus();
}

// A miss: the real compiler, unchanged, observed (observed_manifest.h: every process it runs
// records what it reads, and its temporaries go to a directory of its own). Its outputs are
// stored when it succeeded (`*stored`: whether they were, and why not). Where it cannot be
// observed it runs uncached.
int CompileAndStore(const LauncherOptions& options, const Prepared& prepared,
                    const std::vector<std::string>& args, FileDigests& digests,
                    absl::Status* stored) {
  std::vector<std::string> argv = {prepared.compiler_path};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<Observation> observation =
      Observation::Begin(options.observe_library, options.lookup.kcache_binaries);
  if (!observation.ok()) {
    digests.Save();
    Log(options, absl::StrCat("uncached (unreadable_input): the compile cannot be observed: ",
                              observation.status().message()));
    if (options.note_uncached) options.note_uncached(UncachedReason::kUnreadableInput, "");
    return ExecReplacing(argv);
  }
  std::vector<std::string> env = observation->Environment(environ);
  RunSettings settings;
  settings.env = &env;
  settings.started = [&](pid_t pid) { observation->NoteStarted(pid, prepared.compiler_path); };
  absl::Time compiled_from = CoarseNow();
  absl::StatusOr<ProcessResult> result = RunCaptured(argv, settings);
  if (!result.ok()) {
    std::fprintf(stderr, "kcache: %s\n", std::string(result.status().message()).c_str());
    *stored = result.status();
    return 127;
  }
  std::fwrite(result->stdout_text.data(), 1, result->stdout_text.size(), stdout);
  std::fwrite(result->stderr_text.data(), 1, result->stderr_text.size(), stderr);
  std::fflush(stdout);
  *stored = result->exit_code == 0
                ? Store(options, prepared, *observation, *result, compiled_from, digests)
                : absl::AbortedError("the compile failed");
  return result->exit_code;
}

// A hit: writes its outputs and replays the compiler's; the exit code to leave with. nullopt
// when the outputs could not be written (then compile).
std::optional<int> Serve(const LauncherOptions& options, const Prepared& prepared,
                         FileDigests& digests, absl::Time started, const Hit& hit) {
  if (!WriteOutputs(prepared, hit.bundle)) return std::nullopt;
  digests.Save();
  int64_t tenths = absl::ToInt64Microseconds(absl::Now() - started) / 100;  // of a ms
  Log(options, absl::StrCat("hit ", CommandSubject(prepared.command), " (", tenths / 10, ".",
                            tenths % 10, " ms)"));
  return Replay(prepared, hit.bundle);
}

// The cache a lookup reads; nullopt (and said when no launcher follows) when it cannot open.
std::unique_ptr<ObjectCache> OpenToRead(const LauncherOptions& options) {
  absl::StatusOr<std::unique_ptr<ObjectCache>> cache =
      options.open_cache_to_read ? options.open_cache_to_read() : options.open_cache();
  if (cache.ok()) return *std::move(cache);
  if (!options.hand_off)
    Log(options, absl::StrCat("cache unavailable: ", cache.status().message()));
  return nullptr;
}

// Looks the command up and, on a hit, writes its outputs and replays the compiler's: the exit
// code to leave with. nullopt on a miss; `*made` gets what the lookup found (Lookup).
std::optional<int> ServeHit(const LauncherOptions& options, const Prepared& prepared,
                            FileDigests& digests, absl::Time started, HandedMiss* made) {
  std::unique_ptr<ObjectCache> cache = OpenToRead(options);
  if (cache == nullptr) return std::nullopt;
  std::optional<Hit> hit = Lookup(options, *cache, prepared, digests, made);
  cache.reset();  // a store directory is not held while compiling
  return hit.has_value() ? Serve(options, prepared, digests, started, *hit) : std::nullopt;
}

// A handed lookup's entries that matched but were not fetched, fetched by id (no listing):
// the first usable one is served.
std::optional<int> ServeHanded(const LauncherOptions& options, const Prepared& prepared,
                               FileDigests& digests, absl::Time started, const HandedMiss& handed) {
  if (handed.fetch.empty()) return std::nullopt;
  std::unique_ptr<ObjectCache> cache = OpenToRead(options);
  if (cache == nullptr) return std::nullopt;
  for (const HandedEntry& entry : handed.fetch) {
    if (std::optional<Hit> hit =
            Fetch(options, *cache, ObjectEntryKey{prepared.key.key1, entry.id})) {
      cache.reset();
      return Serve(options, prepared, digests, started, *hit);
    }
  }
  return std::nullopt;
}

}  // namespace

CompilerFamily FamilyOfCompiler(const std::string& name) {
  return fs::path(name).filename() == "nvcc" ? CompilerFamily::kNvcc : CompilerFamily::kGcc;
}

int RunLauncher(const LauncherOptions& options, CompilerFamily family, const std::string& compiler,
                const std::vector<std::string>& args) {
  absl::Time started = absl::Now();
  const HandedMiss* handed = options.handed;
  absl::StatusOr<std::string> compiler_path =
      handed != nullptr ? handed->compiler_path : RealCompiler(options, family, compiler);
  if (!compiler_path.ok()) {
    std::fprintf(stderr, "kcache: %s\n", std::string(compiler_path.status().message()).c_str());
    return 127;
  }
  std::vector<std::string> argv = {*compiler_path};
  argv.insert(argv.end(), args.begin(), args.end());
  FileDigests digests(options.digest_table);
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<Prepared> prepared =
      handed != nullptr ? PrepareHanded(options, family, args, *handed, digests, &reason)
                        : Prepare(options, family, *compiler_path, args, digests, &reason);
  if (!prepared.ok()) {
    digests.Save();
    Log(options,
        absl::StrCat("uncached (", UncachedReasonName(reason), "): ", prepared.status().message()));
    if (options.note_uncached) {
      options.note_uncached(reason, UncachedOptionName(prepared.status().message()));
    }
    return ExecReplacing(argv);
  }
  HandedMiss made;  // what this pass's lookup found (handed on by kcache-launch)
  std::optional<int> served;
  if (handed != nullptr && handed->looked_up) {
    made.listed = handed->listed;
    served = ServeHanded(options, *prepared, digests, started, *handed);
  } else {
    served = ServeHit(options, *prepared, digests, started, &made);
  }
  if (served.has_value()) return *served;
  if (options.hand_off) {
    digests.Save();
    made.compiler_path = prepared->compiler_path;
    made.tools = prepared->tools;
    made.key = prepared->key;
    return options.hand_off(made);
  }
  std::vector<std::string>& listed = made.listed;
  Log(options, absl::StrCat("miss ", CommandSubject(prepared->command),
                            handed == nullptr   ? ""
                            : handed->looked_up ? " (key and lookup handed over by kcache-launch)"
                                                : " (key handed over by kcache-launch)"));
  std::unique_ptr<CompileTurn> turn =
      options.await_turn
          ? options.await_turn(prepared->key.key1, listed, CommandSubject(prepared->command))
          : nullptr;
  if (turn != nullptr && turn->arrived()) {
    listed.clear();
    served = ServeHit(options, *prepared, digests, started, &made);
    turn->Served(served.has_value());
    if (served.has_value()) return *served;
  }
  absl::Status stored;
  int exit_code = CompileAndStore(options, *prepared, args, digests, &stored);
  if (turn != nullptr) turn->Compiled(exit_code, stored);
  digests.Save();
  return exit_code;
}

}  // namespace kcache::objects
