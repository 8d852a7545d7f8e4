#include "engine/objects/launcher.h"

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
#include "absl/time/clock.h"
#include "core/file_io.h"
#include "engine/objects/file_digests.h"
#include "engine/objects/precompiled_headers.h"
#include "engine/objects/prepared_command.h"
#include "engine/objects/run_process.h"

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

// The first entry whose manifest matches, fetched and decoded; nullopt on a miss (a corrupt
// or unreadable entry is a miss).
std::optional<Hit> Lookup(const LauncherOptions& options, ObjectCache& cache,
                          const Prepared& prepared, FileDigests& digests) {
  absl::StatusOr<std::vector<ObjectEntryMeta>> entries = cache.List(prepared.key.key1);
  if (!entries.ok()) {
    Log(options, absl::StrCat("lookup failed: ", entries.status().message()));
    return std::nullopt;
  }
  for (const ObjectEntryMeta& entry : *entries) {
    if (!ManifestMatches(entry.manifest, prepared.dirs, digests, nullptr)) continue;
    absl::StatusOr<HeldBytes> held = cache.GetHeld(entry.key);
    if (!held.ok()) {
      Log(options, absl::StrCat("entry unusable: ", held.status().message()));
      continue;
    }
    absl::StatusOr<ObjectBundleView> bundle = DecodeBundleView(held->bytes);
    if (bundle.ok()) return Hit{*std::move(held), *std::move(bundle)};
    Log(options, absl::StrCat("entry unusable: ", bundle.status().message()));
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
    for (const std::string& target : bundle.deps.targets) {
      deps.targets.push_back(prepared.dirs.Restore(target));
    }
    for (const std::string& dep : bundle.deps.deps) deps.deps.push_back(prepared.dirs.Restore(dep));
    if (!WriteFileAtomically(command.dep_file, WriteDepFile(deps)).ok()) return false;
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

// A link's own working files: a private TMPDIR for the compiler's temporary object, and the
// linker's dependency output (every object, library and script it read) inside it.
struct LinkFiles {
  std::string temp_dir;  // "" for a compile that does not link
  std::string deps() const { return absl::StrCat(temp_dir, "/link.d"); }
};

// What the compile read besides the headers of its dependency output: any precompiled
// header it may have read in place of one (precompiled_headers.h), by content; for a link,
// every input the linker listed but the compiler's temporary object, as the linker reads them
// (DigestKind::kLinkInput). Sets *why and *reason and returns the status when the compile
// cannot be keyed.
absl::StatusOr<Manifest> OtherInputs(const LauncherOptions& options, const Prepared& prepared,
                                     const LinkFiles& link, FileDigests& digests,
                                     absl::Time compiled_from, UncachedReason* reason) {
  std::vector<std::string> headers;
  if (prepared.command.family == CompilerFamily::kGcc && !prepared.command.source.empty()) {
    absl::StatusOr<std::vector<std::string>> found = PrecompiledHeaders(
        prepared.command, prepared.compiler_path, prepared.dirs.cwd, options.lookup.env);
    if (!found.ok()) {
      *reason = UncachedReason::kUnreadableInput;
      return found.status();
    }
    headers = std::move(*found);
  }
  absl::StatusOr<Manifest> manifest = MakeInputManifest(headers, prepared.dirs, digests, reason,
                                                        compiled_from, DigestKind::kContent);
  if (!manifest.ok() || link.temp_dir.empty()) return manifest;
  absl::StatusOr<std::string> text = ReadWholeFile(link.deps());
  if (!text.ok()) {
    *reason = UncachedReason::kUnreadableInput;
    return absl::FailedPreconditionError("the linker listed no inputs");
  }
  std::set<std::string> seen(headers.begin(), headers.end());
  std::vector<std::string> inputs;
  std::string temporary = absl::StrCat(link.temp_dir, "/");
  for (const std::string& input : ParseDepFile(*text).deps) {
    if (absl::StartsWith(input, temporary)) continue;  // the source's object, gone now
    if (seen.insert(input).second) inputs.push_back(input);
  }
  absl::StatusOr<Manifest> linked = MakeInputManifest(inputs, prepared.dirs, digests, reason,
                                                      compiled_from, DigestKind::kLinkInput);
  if (!linked.ok()) return linked.status();
  manifest->insert(manifest->end(), linked->begin(), linked->end());
  return manifest;
}

// Stores a successful compile's outputs. Failures only mean the next build compiles again.
void Store(const LauncherOptions& options, const Prepared& prepared, const std::string& dep_path,
           const LinkFiles& link, const ProcessResult& result, absl::Time compiled_from,
           FileDigests& digests) {
  const BaseDirs& dirs = prepared.dirs;
  absl::StatusOr<std::string> object = ReadWholeFile(prepared.command.output);
  // A link of objects reads no source and writes no dependency file: the linker's lists all.
  absl::StatusOr<std::string> dep_text = dep_path.empty() ? std::string() : ReadWholeFile(dep_path);
  if (!object.ok() || !dep_text.ok()) {
    Log(options, "not stored: the compiler's outputs could not be read");
    return;
  }
  DepFile deps = ParseDepFile(*dep_text);
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<Manifest> manifest = MakeManifest(deps, dirs, digests, &reason, compiled_from);
  if (manifest.ok()) {
    absl::StatusOr<Manifest> more =
        OtherInputs(options, prepared, link, digests, compiled_from, &reason);
    if (more.ok()) {
      manifest->insert(manifest->end(), more->begin(), more->end());
    } else {
      manifest = more.status();
    }
  }
  if (!manifest.ok()) {
    Log(options, absl::StrCat("not stored (", UncachedReasonName(reason),
                              "): ", manifest.status().message()));
    if (options.note_uncached) options.note_uncached(reason);
    return;
  }
  ObjectBundle bundle;
  bundle.object = std::move(*object);
  for (const std::string& target : deps.targets)
    bundle.deps.targets.push_back(dirs.Normalize(target));
  for (const std::string& dep : deps.deps) bundle.deps.deps.push_back(dirs.Normalize(dep));
  bundle.stdout_text = dirs.Normalize(result.stdout_text);
  bundle.stderr_text = dirs.Normalize(result.stderr_text);
  bundle.exit_code = result.exit_code;
  std::string bytes = EncodeBundle(bundle);
  if (bytes.size() > options.max_object_bytes) {
    Log(options, absl::StrCat("not stored: ", bytes.size(), " bytes is over --max-object-bytes ",
                              options.max_object_bytes));
    return;
  }
  ObjectEntryMeta entry;
  entry.key = ObjectArtifactKey(prepared.key.key1, *manifest);
  entry.source = prepared.key.source;
  entry.manifest = std::move(*manifest);
  entry.fields = prepared.key.fields;
  absl::StatusOr<std::unique_ptr<ObjectCache>> cache = options.open_cache();
  absl::Status put = cache.ok() ? (*cache)->Put(entry, bytes) : cache.status();
  if (!put.ok()) Log(options, absl::StrCat("not stored: ", put.message()));
}

// Whether the linker takes --dependency-file (GNU ld 2.35 and later): a link is stored only
// when the linker lists what it read.
bool LinkerListsInputs(const Prepared& prepared) {
  for (const ToolFile& tool : prepared.tools) {
    if (tool.role != "linker") continue;
    absl::StatusOr<ProcessResult> help = RunCaptured({tool.path, "--help"});
    return help.ok() && absl::StrContains(help->stdout_text, "--dependency-file");
  }
  return false;
}

// Runs `argv` with TMPDIR set to `temp_dir` ("" leaves it as it is).
absl::StatusOr<ProcessResult> RunWithTempDir(const std::vector<std::string>& argv,
                                             const std::string& temp_dir) {
  if (temp_dir.empty()) return RunCaptured(argv);
  const char* before = std::getenv("TMPDIR");
  std::optional<std::string> saved;
  if (before != nullptr) saved = before;
  setenv("TMPDIR", temp_dir.c_str(), 1);
  absl::StatusOr<ProcessResult> result = RunCaptured(argv);
  if (saved.has_value()) {
    setenv("TMPDIR", saved->c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  return result;
}

// A miss: the real compiler, unchanged but for what lets kcache see every input: a dependency
// file of our own when a compile asked for none, and for a link the linker's dependency output and
// a private TMPDIR (so the compiler's temporary object is told apart from the linker's real
// inputs). Its outputs are stored when it succeeded.
int CompileAndStore(const LauncherOptions& options, const Prepared& prepared,
                    const std::vector<std::string>& args, FileDigests& digests) {
  std::vector<std::string> argv = {prepared.compiler_path};
  argv.insert(argv.end(), args.begin(), args.end());
  const CompilerCommand& command = prepared.command;
  LinkFiles link;
  if (RunsLinker(command.kind)) {
    std::string base = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
    std::string pattern = absl::StrCat(base, "/kcache-link-XXXXXX");
    if (!LinkerListsInputs(prepared) || mkdtemp(pattern.data()) == nullptr) {
      digests.Save();
      Log(options,
          "uncached (unreadable_input): the linker cannot list its inputs "
          "(GNU ld 2.35 or later does: --dependency-file)");
      if (options.note_uncached) options.note_uncached(UncachedReason::kUnreadableInput);
      return ExecReplacing(argv);
    }
    link.temp_dir = pattern;
    argv.push_back(absl::StrCat("-Wl,--dependency-file=", link.deps()));
  }
  if (command.user_only_deps_arg >= 0) {  // -MMD: every header, for the manifest
    argv[1 + command.user_only_deps_arg] = "-MD";
  }
  std::string dep_path = command.dep_file;
  // A link of objects has no source to list the headers of.
  bool own_deps = !command.writes_deps && command.kind != CompilerOutput::kLinkedLibrary;
  if (own_deps) {
    dep_path = absl::StrCat(command.output, ".kcache-", getpid(), ".d");
    argv.insert(argv.end(), {"-MD", "-MF", dep_path});
  }
  absl::Time compiled_from = CoarseNow();
  absl::StatusOr<ProcessResult> result = RunWithTempDir(argv, link.temp_dir);
  if (!result.ok()) {
    std::fprintf(stderr, "kcache: %s\n", std::string(result.status().message()).c_str());
    return 127;
  }
  std::fwrite(result->stdout_text.data(), 1, result->stdout_text.size(), stdout);
  std::fwrite(result->stderr_text.data(), 1, result->stderr_text.size(), stderr);
  std::fflush(stdout);
  if (result->exit_code == 0) {
    Store(options, prepared, dep_path, link, *result, compiled_from, digests);
  }
  std::error_code ec;
  if (own_deps) fs::remove(dep_path, ec);
  if (!link.temp_dir.empty()) fs::remove_all(link.temp_dir, ec);
  return result->exit_code;
}

}  // namespace

CompilerFamily FamilyOfCompiler(const std::string& name) {
  return fs::path(name).filename() == "nvcc" ? CompilerFamily::kNvcc : CompilerFamily::kGcc;
}

int RunLauncher(const LauncherOptions& options, CompilerFamily family, const std::string& compiler,
                const std::vector<std::string>& args) {
  absl::Time started = absl::Now();
  absl::StatusOr<std::string> compiler_path = RealCompiler(options, family, compiler);
  if (!compiler_path.ok()) {
    std::fprintf(stderr, "kcache: %s\n", std::string(compiler_path.status().message()).c_str());
    return 127;
  }
  std::vector<std::string> argv = {*compiler_path};
  argv.insert(argv.end(), args.begin(), args.end());
  FileDigests digests(options.digest_table);
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<Prepared> prepared =
      Prepare(options, family, *compiler_path, args, digests, &reason);
  if (!prepared.ok()) {
    digests.Save();
    Log(options,
        absl::StrCat("uncached (", UncachedReasonName(reason), "): ", prepared.status().message()));
    if (options.note_uncached) options.note_uncached(reason);
    return ExecReplacing(argv);
  }
  absl::StatusOr<std::unique_ptr<ObjectCache>> cache =
      options.open_cache_to_read ? options.open_cache_to_read() : options.open_cache();
  if (cache.ok()) {
    std::optional<Hit> hit = Lookup(options, **cache, *prepared, digests);
    cache->reset();  // a store directory is not held while compiling
    if (hit.has_value() && WriteOutputs(*prepared, hit->bundle)) {
      digests.Save();
      int64_t tenths = absl::ToInt64Microseconds(absl::Now() - started) / 100;  // of a ms
      Log(options, absl::StrCat("hit ", CommandSubject(prepared->command), " (", tenths / 10, ".",
                                tenths % 10, " ms)"));
      return Replay(*prepared, hit->bundle);
    }
  } else if (!options.hand_off) {
    Log(options, absl::StrCat("cache unavailable: ", cache.status().message()));
  }
  if (options.hand_off) {
    digests.Save();
    return options.hand_off();
  }
  Log(options, absl::StrCat("miss ", CommandSubject(prepared->command)));
  int exit_code = CompileAndStore(options, *prepared, args, digests);
  digests.Save();
  return exit_code;
}

}  // namespace kcache::objects
