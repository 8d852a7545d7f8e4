#include "engine/keys/observed_manifest.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/environment.h"
#include "core/file_io.h"
#include "engine/observe/observe_log.h"

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

constexpr char kLogName[] = "observed.log";

// Variables a compile's processes read that are never keyed, and why.
bool IgnoredVariable(const std::string& name) {
  // kcache's own settings, and the observer itself (LD_PRELOAD holds the library; any other
  // library it preloads is recorded as loaded, by content).
  if (absl::StartsWith(name, "KCACHE_") || name == "LD_PRELOAD") return true;
  static const absl::flat_hash_set<std::string> kIgnored = {
      // Where temporaries go: what is written there is an output, never an input (the
      // observed compile's TMPDIR is a directory of its own, different in every run).
      "TMPDIR", "TMP", "TEMP", "TEMPDIR",
      // How diagnostics look on a terminal: a launcher's compile writes to pipes.
      "TERM", "COLUMNS", "NOCOLOR", "NO_COLOR", "GCC_COLORS", "GCC_URLS", "TERM_URLS",
      // make's jobserver, which gcc joins for -flto's partitions (an -flto link is uncached):
      // its descriptors differ in every make run.
      "MAKEFLAGS", "MFLAGS", "MAKELEVEL"};
  return kIgnored.contains(name);
}

// Files every process may touch that are not inputs: the null and random devices, its own
// /proc entries.
bool HarmlessDevice(const std::string& path, const absl::flat_hash_set<std::string>& pid_dirs) {
  static const absl::flat_hash_set<std::string> kDevices = {
      "/dev/null",  "/dev/zero",   "/dev/full",   "/dev/random", "/dev/urandom",     "/dev/tty",
      "/dev/stdin", "/dev/stdout", "/dev/stderr", "/proc/self",  "/proc/thread-self"};
  if (kDevices.contains(path)) return true;
  for (absl::string_view own : {"/proc/self/", "/proc/thread-self/", "/dev/fd/"}) {
    if (absl::StartsWith(path, own)) return true;
  }
  if (absl::StartsWith(path, "/proc/")) {
    size_t end = path.find('/', 6);
    return pid_dirs.contains(path.substr(0, end));
  }
  return false;
}

// Paths whose content is this machine's state, not a file's: never keyed.
bool MachineState(const std::string& path) {
  return absl::StartsWith(path, "/proc/") || absl::StartsWith(path, "/sys/") ||
         absl::StartsWith(path, "/dev/") || path == "/proc" || path == "/sys";
}

bool Under(const std::string& path, const std::string& dir) {
  return !dir.empty() && absl::StartsWith(path, dir) &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

// The first component of `path` that does not exist now (the path itself when its parent
// does): a missing directory stands for every name looked up below it.
std::string FirstMissing(const std::string& path) {
  size_t at = 1;
  while (at < path.size()) {
    size_t slash = path.find('/', at);
    std::string prefix = path.substr(0, slash);
    struct stat st {};
    if (lstat(prefix.c_str(), &st) != 0) return prefix;
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  return path;
}

absl::Status Uncached(UncachedReason* reason, UncachedReason why, std::string message) {
  *reason = why;
  return absl::FailedPreconditionError(std::move(message));
}

// nvcc's device front ends read the clock for their own timing; what they write does not
// depend on it (tests/integration/observed_inputs_test.cc compiles across a second and
// compares).
bool ReadsClockHarmlessly(const std::string& exe) {
  std::string name = fs::path(exe).filename().string();
  return name == "cicc" || name == "cudafe++";
}

}  // namespace

Observation::Observation(std::string temp_dir, std::string library, std::string skip)
    : temp_dir_(std::move(temp_dir)), library_(std::move(library)), skip_(std::move(skip)) {}

Observation::Observation(Observation&& other) noexcept
    : temp_dir_(std::move(other.temp_dir_)),
      library_(std::move(other.library_)),
      skip_(std::move(other.skip_)) {
  other.temp_dir_.clear();
}

Observation::~Observation() {
  if (temp_dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(temp_dir_, ec);
}

absl::StatusOr<Observation> Observation::Begin(const std::string& library,
                                               const std::vector<std::string>& skip) {
  if (library.empty()) {
    return absl::FailedPreconditionError(
        "libkcache-observe.so is not installed beside kcache (lib/kcache/ of its prefix): "
        "reinstall kcache");
  }
  std::string base = EnvValue("TMPDIR");
  std::string pattern =
      absl::StrCat(!base.empty() && base[0] == '/' ? base : "/tmp", "/kcache-compile-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make a directory like ", pattern, ": ", std::strerror(errno)));
  }
  Observation observation(pattern, library, absl::StrJoin(skip, ":"));
  std::string log = absl::StrCat(pattern, "/", kLogName);
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", log, ": ", std::strerror(errno)));
  }
  close(fd);
  return observation;
}

std::vector<std::string> Observation::Environment(char** base) const {
  std::vector<std::string> env;
  std::string preload = library_;
  std::vector<std::string> stand_ins = {FindNvrtcStandIn(library_, 13),
                                        FindNvrtcStandIn(library_, 12), FindCudaStandIn(library_)};
  auto is_stand_in = [&](absl::string_view item) {
    for (const std::string& stand_in : stand_ins) {
      std::error_code ec;
      if (!stand_in.empty() && fs::equivalent(std::string(item), stand_in, ec) && !ec) return true;
    }
    return false;
  };
  for (char** entry = base; entry != nullptr && *entry != nullptr; ++entry) {
    absl::string_view text(*entry);
    if (absl::ConsumePrefix(&text, "LD_PRELOAD=")) {
      for (absl::string_view item :
           absl::StrSplit(text, absl::ByAnyChar(": "), absl::SkipEmpty())) {
        if (!is_stand_in(item)) absl::StrAppend(&preload, ":", item);
      }
      continue;
    }
    if (absl::StartsWith(text, "TMPDIR=") || absl::StartsWith(text, KCACHE_OBSERVE_LOG_VAR "=") ||
        absl::StartsWith(text, KCACHE_OBSERVE_SKIP_VAR "=")) {
      continue;
    }
    env.emplace_back(text);
  }
  env.push_back(absl::StrCat("LD_PRELOAD=", preload));
  env.push_back(absl::StrCat(KCACHE_OBSERVE_LOG_VAR, "=", temp_dir_, "/", kLogName));
  env.push_back(absl::StrCat(KCACHE_OBSERVE_SKIP_VAR, "=", skip_));
  env.push_back(absl::StrCat("TMPDIR=", temp_dir_));
  return env;
}

void Observation::NoteStarted(pid_t pid, const std::string& compiler) const {
  std::string line = absl::StrCat(std::string(1, KCACHE_OBSERVE_EXEC), " ", getpid(), " ", pid,
                                  "\t", compiler, "\n");
  int fd = open(absl::StrCat(temp_dir_, "/", kLogName).c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;  // then the compiler's start is unmatched and nothing is stored
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

absl::StatusOr<observe::ObservedReads> Observation::Read() const {
  std::string log = absl::StrCat(temp_dir_, "/", kLogName);
  struct stat st {};
  if (stat(log.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > kMaxLogBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("the compile's observation log is ",
                                                     st.st_size, " bytes, over ", kMaxLogBytes));
  }
  return observe::ReadObservation(log);
}

std::string FindObserveLibrary(const std::string& binary) {
  fs::path dir = fs::path(binary).parent_path();
  for (const fs::path& candidate :
       {dir / "libkcache-observe.so", dir / ".." / "lib" / "kcache" / "libkcache-observe.so"}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) {
      return fs::weakly_canonical(candidate, ec).string();
    }
  }
  return "";
}

namespace {

// `folder`/`file` beside `observe_library`, when it is there.
std::string BesideObserver(const std::string& observe_library, const char* folder,
                           const std::string& file) {
  if (observe_library.empty()) return "";
  fs::path candidate = fs::path(observe_library).parent_path() / folder / file;
  std::error_code ec;
  return fs::is_regular_file(candidate, ec) ? candidate.string() : "";
}

}  // namespace

std::string FindNvrtcStandIn(const std::string& observe_library, int major) {
  return BesideObserver(observe_library, "nvrtc", absl::StrCat("libnvrtc.so.", major));
}

std::string FindCudaStandIn(const std::string& observe_library) {
  return BesideObserver(observe_library, "cuda", "libcuda.so.1");
}

// Whether `option` (an argument or value the observer recorded as naming a native target)
// names only gcc's -march/-mcpu/-mtune=native, no GPU architecture.
bool OnlyHostNativeTuning(const std::string& option) {
  std::string rest = absl::StrReplaceAll(
      option, {{"-march=native", ""}, {"-mcpu=native", ""}, {"-mtune=native", ""}});
  return !absl::StrContains(rest, "native");
}

absl::StatusOr<HeaderManifest> ObservedManifest(const observe::ObservedReads& reads,
                                                const ObservedCompile& compile,
                                                FileDigests& digests, absl::Time compiled_from,
                                                UncachedReason* reason) {
  const BaseDirs& dirs = *compile.dirs;
  if (!compile.in_process && reads.processes.empty()) {
    return Uncached(reason, UncachedReason::kUnreadableInput,
                    "the compiler recorded nothing (it is statically linked, or the observer "
                    "did not load)");
  }
  if (!reads.unobservable.empty()) {
    const auto& [path, why] = reads.unobservable.front();
    return Uncached(reason, UncachedReason::kUnreadableInput,
                    absl::StrCat(path, " ran unobserved: ", why));
  }
  for (const auto& [where, option] : reads.native_targets) {
    if (compile.host_native_keyed && OnlyHostNativeTuning(option)) continue;
    return Uncached(
        reason, UncachedReason::kNativeTarget,
        absl::StrCat(where, " was given ", option,
                     ": the machine it runs on picks the code, and no file says which"));
  }
  if (!reads.unstarted.empty()) {
    return Uncached(
        reason, UncachedReason::kUnreadableInput,
        absl::StrCat(reads.unstarted.front().second, " started without recording its start"));
  }
  for (const std::string& name : reads.unloadable) {
    if (std::find(compile.keyed_libraries.begin(), compile.keyed_libraries.end(), name) ==
        compile.keyed_libraries.end()) {
      return Uncached(reason, UncachedReason::kUnreadableInput,
                      absl::StrCat("the compile could not load ", name,
                                   ", and where the loader looked is not recorded"));
    }
  }
  for (pid_t pid : compile.in_process ? std::vector<pid_t>{} : reads.clock_readers) {
    auto it = reads.processes.find(pid);
    std::string exe = it == reads.processes.end() ? "a process" : it->second;
    if (!ReadsClockHarmlessly(exe)) {
      return Uncached(reason, UncachedReason::kTimeMacros,
                      absl::StrCat(exe, " read the clock (__DATE__, __TIME__)"));
    }
  }

  HeaderManifest manifest;
  // The environment the compile's processes read, as the launcher had it.
  std::set<std::string> variables;
  for (const observe::EnvRead& read : reads.env) {
    if (IgnoredVariable(read.name) || variables.contains(read.name)) continue;
    auto it = compile.env->find(read.name);
    std::optional<std::string> launcher;
    if (it != compile.env->end()) launcher = it->second;
    if (launcher != read.value) continue;  // set by a process of the compile for another
    variables.insert(read.name);
    manifest.emplace_back(absl::StrCat("$", read.name),
                          EnvironmentFact(read.name, *compile.env, dirs));
  }

  absl::flat_hash_set<std::string> pid_dirs;
  for (const auto& [pid, exe] : reads.processes) pid_dirs.insert(absl::StrCat("/proc/", pid));
  absl::flat_hash_set<pid_t> linker_pids;
  for (const auto& [pid, exe] : reads.processes) {
    if (std::find(compile.linkers.begin(), compile.linkers.end(), exe) != compile.linkers.end()) {
      linker_pids.insert(pid);
    }
  }
  std::string log = absl::StrCat(compile.temp_dir, "/", kLogName);
  auto excluded = [&](const std::string& path) {
    if (Under(path, compile.temp_dir) || path == compile.library || path == log ||
        reads.written.contains(path) || HarmlessDevice(path, pid_dirs)) {
      return true;
    }
    return std::find(compile.outputs.begin(), compile.outputs.end(), path) != compile.outputs.end();
  };

  // What a hit writes is the command's outputs: a compile that wrote anything else (a kept
  // temporary, a listing, a second object an option asked for) would leave it unwritten.
  for (const std::string& path : reads.written) {
    if (Under(path, compile.temp_dir) || HarmlessDevice(path, pid_dirs) ||
        std::find(compile.outputs.begin(), compile.outputs.end(), path) != compile.outputs.end()) {
      continue;
    }
    return Uncached(reason, UncachedReason::kKeepTemps,
                    absl::StrCat("the compile wrote ", path,
                                 ", which a hit would not write (only -o and -MF are replayed)"));
  }

  // Files read, by how they are digested; other facts as the values they are recorded with.
  std::set<std::string> text, tools, link_inputs, read_paths;
  std::map<std::string, std::set<std::string>> facts;  // path -> values
  for (const auto& [pid, exe] : reads.processes) {
    if (!excluded(exe)) tools.insert(exe);
  }
  std::set<std::string> absent;
  for (const observe::PathFact& fact : reads.facts) {
    // "dir/" is "dir" (a check stats it by its last component).
    std::string path = fact.path;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path.empty() || path[0] != '/' || excluded(path)) continue;
    if (MachineState(path)) {
      return Uncached(reason, UncachedReason::kUnreadableInput,
                      absl::StrCat("the compile read ", path, ", this machine's state"));
    }
    switch (fact.kind) {
      case KCACHE_OBSERVE_READ:
        read_paths.insert(path);
        break;
      case KCACHE_OBSERVE_LOADED:
        if (std::find(compile.keyed_libraries.begin(), compile.keyed_libraries.end(),
                      fs::path(path).filename().string()) != compile.keyed_libraries.end()) {
          break;
        }
        tools.insert(path);
        break;
      case KCACHE_OBSERVE_EXISTS:
      case KCACHE_OBSERVE_LEXISTS: {
        struct stat st {};
        bool follow = fact.kind == KCACHE_OBSERVE_EXISTS;
        if ((follow ? stat(path.c_str(), &st) : lstat(path.c_str(), &st)) != 0) {
          return Uncached(reason, UncachedReason::kInputChanged,
                          absl::StrCat(path, " went away while it compiled"));
        }
        facts[path].insert(absl::StrCat(follow ? kExistsPrefix : kLexistsPrefix, FileTypeName(st)));
        break;
      }
      case KCACHE_OBSERVE_ABSENT:
        absent.insert(path);
        break;
      case KCACHE_OBSERVE_FAILED: {
        struct stat st {};
        if (stat(path.c_str(), &st) == 0 || absl::StrCat(errno) != fact.value) {
          return Uncached(reason, UncachedReason::kUnreadableInput,
                          absl::StrCat("the compile could not read ", path, ": ",
                                       std::strerror(std::atoi(fact.value.c_str()))));
        }
        facts[path].insert(absl::StrCat(kFailedPrefix, fact.value));
        break;
      }
      case KCACHE_OBSERVE_LISTED: {
        absl::StatusOr<std::string> listing = ListingDigest(path);
        if (!listing.ok()) {
          return Uncached(reason, UncachedReason::kUnreadableInput,
                          std::string(listing.status().message()));
        }
        facts[path].insert(absl::StrCat(kListingPrefix, *listing));
        break;
      }
      case KCACHE_OBSERVE_LINK:
        facts[path].insert(absl::StrCat(kReadlinkPrefix, dirs.Normalize(fact.value)));
        break;
      case KCACHE_OBSERVE_REALPATH:
        facts[path].insert(absl::StrCat(kRealpathPrefix, dirs.Normalize(fact.value)));
        break;
      default:
        break;
    }
    if (fact.kind == KCACHE_OBSERVE_READ && linker_pids.contains(fact.pid)) {
      link_inputs.insert(path);
    }
  }
  // A path looked for and not found: absent still, or it appeared while the compile ran.
  std::set<std::string> missing;
  for (const std::string& path : absent) {
    if (read_paths.contains(path)) {
      return Uncached(reason, UncachedReason::kInputChanged,
                      absl::StrCat(path, " appeared while it compiled"));
    }
    std::string first = FirstMissing(path);
    if (first == path) {
      struct stat st {};
      if (lstat(path.c_str(), &st) == 0) {
        return Uncached(reason, UncachedReason::kInputChanged,
                        absl::StrCat(path, " appeared while it compiled"));
      }
    }
    missing.insert(first);
  }
  for (const std::string& path : missing) facts[path].insert(std::string(kAbsentFact));
  // Files read: directories by their type; a linker's inputs as it reads them; the rest by
  // content. No file is searched for time macros: a preprocessor expanding one reads the clock
  // (above), and a precompiled header names them all in its bytes. NVRTC reads it at every
  // compile; whether that reaches the output is shown by compiling again under another date
  // (client/cli/nvrtc_clock_probe.h).
  for (const std::string& path : read_paths) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      facts[path].insert(absl::StrCat(kExistsPrefix, "dir"));
      continue;
    }
    if (tools.contains(path)) continue;
    if (!link_inputs.contains(path)) text.insert(path);
  }
  for (const std::string& path : link_inputs) text.erase(path);
  auto add = [&](const std::set<std::string>& paths, DigestKind kind,
                 absl::string_view prefix) -> absl::Status {
    std::vector<std::string> list(paths.begin(), paths.end());
    absl::StatusOr<HeaderManifest> part =
        MakeInputManifest(list, dirs, digests, reason, compiled_from, kind);
    if (!part.ok()) return part.status();
    for (auto& [path, digest] : *part) {
      manifest.emplace_back(std::move(path), absl::StrCat(prefix, digest));
    }
    return absl::OkStatus();
  };
  if (absl::Status done = add(text, DigestKind::kContent, ""); !done.ok()) return done;
  if (absl::Status done = add(tools, DigestKind::kTool, kToolPrefix); !done.ok()) return done;
  if (absl::Status done = add(link_inputs, DigestKind::kLinkInput, ""); !done.ok()) return done;
  // A digested file's line says too that it resolves to itself, when it does (a
  // preprocessor asks that of every header: a line each would double the manifest).
  absl::flat_hash_map<std::string, size_t> digest_line;  // normalized path -> its line
  for (size_t i = 0; i < manifest.size(); ++i) {
    if (manifest[i].first[0] != '$') digest_line.emplace(manifest[i].first, i);
  }
  for (const auto& [path, values] : facts) {
    std::string normalized = dirs.Normalize(path);
    auto digested = digest_line.find(normalized);
    for (const std::string& value : values) {
      if (digested != digest_line.end()) {
        // A file whose content is keyed already shows that it exists.
        if (value == absl::StrCat(kExistsPrefix, "file")) continue;
        if (value == absl::StrCat(kRealpathPrefix, normalized)) {
          std::string& line = manifest[digested->second].second;
          if (!absl::StartsWith(line, kResolvesToItselfMark)) {
            line.insert(0, kResolvesToItselfMark.data(), kResolvesToItselfMark.size());
          }
          continue;
        }
      }
      manifest.emplace_back(normalized, value);
    }
  }
  std::sort(manifest.begin(), manifest.end());
  manifest.erase(std::unique(manifest.begin(), manifest.end()), manifest.end());
  return manifest;
}

}  // namespace kcache::objects
