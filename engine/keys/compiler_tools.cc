#include "engine/keys/compiler_tools.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/file_io.h"
#include "core/run_process.h"
#include "core/sha256.h"

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

// What `compiler -print-prog-name=NAME` answers, as printed ("" when it fails).
std::string AskDriver(const std::string& compiler, const std::string& name) {
  absl::StatusOr<ProcessResult> run =
      RunCaptured({compiler, absl::StrCat("-print-prog-name=", name)});
  if (!run.ok() || run->exit_code != 0) return "";
  return std::string(absl::StripAsciiWhitespace(run->stdout_text));
}

// The roles DriverPrograms answers and the program name each asks the driver for.
constexpr std::pair<const char*, const char*> kDriverPrograms[] = {
    {"cc1", "cc1"},           {"cc1plus", "cc1plus"}, {"as", "as"},
    {"collect2", "collect2"}, {"linker", "ld"},
};

// The directories `compiler -print-search-dirs` searches for programs, in order.
std::vector<std::string> ProgramDirs(const std::string& compiler) {
  absl::StatusOr<ProcessResult> run = RunCaptured({compiler, "-print-search-dirs"});
  std::vector<std::string> dirs;
  if (!run.ok() || run->exit_code != 0) return dirs;
  for (absl::string_view line : absl::StrSplit(run->stdout_text, '\n')) {
    if (!absl::ConsumePrefix(&line, "programs: =")) continue;
    for (absl::string_view dir : absl::StrSplit(line, ':', absl::SkipEmpty())) {
      std::string normal = fs::path(std::string(dir)).lexically_normal().string();
      if (std::find(dirs.begin(), dirs.end(), normal) == dirs.end()) dirs.push_back(normal);
    }
  }
  return dirs;
}

// What the driver's answers depend on, hashed: its own stat, each program directory's (a
// program added to one changes its mtime and ctime) and the environment it searches with.
std::string DriverFingerprint(const std::string& driver, const std::vector<std::string>& dirs,
                              const ToolLookup& lookup) {
  std::string text;
  auto add = [&text](const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
      absl::StrAppend(&text, path, " absent\n");
      return;
    }
    absl::StrAppend(&text, path, " ", st.st_dev, " ", st.st_ino, " ", st.st_size, " ",
                    st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, " ", st.st_ctim.tv_sec, ".",
                    st.st_ctim.tv_nsec, "\n");
  };
  add(driver);
  for (const std::string& dir : dirs) add(dir);
  for (const char* name : {"PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH"}) {
    absl::StrAppend(&text, name, "=", Get(lookup.env, name), "\n");
  }
  return Sha256Hex(text);
}

// The driver's answers (by role, as printed) from the memo, if its line still holds.
std::optional<std::vector<std::string>> RecallPrograms(const std::string& memo,
                                                       const std::string& driver,
                                                       const ToolLookup& lookup) {
  absl::StatusOr<std::string> text = ReadWholeFile(memo);
  if (!text.ok()) return std::nullopt;
  // Each line: driver \t program dirs (':'-joined) \t fingerprint \t one answer per role.
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() != 3 + std::size(kDriverPrograms) || fields[0] != driver) continue;
    std::vector<std::string> dirs = absl::StrSplit(fields[1], ':', absl::SkipEmpty());
    if (DriverFingerprint(driver, dirs, lookup) != fields[2]) return std::nullopt;
    return std::vector<std::string>(fields.begin() + 3, fields.end());
  }
  return std::nullopt;
}

// Memoizes the driver's answers: its line replaces any earlier one (written whole and renamed:
// launchers running at once never see half a file; the last one wins).
void RememberPrograms(const std::string& memo, const std::string& driver,
                      const std::vector<std::string>& dirs, const std::string& fingerprint,
                      const std::vector<std::string>& answers) {
  auto printable = [](absl::string_view field) {
    return field.find_first_of("\t\n") == absl::string_view::npos;
  };
  if (!printable(driver) || !std::all_of(answers.begin(), answers.end(), printable) ||
      !std::all_of(dirs.begin(), dirs.end(), printable)) {
    return;
  }
  std::string text;
  absl::StatusOr<std::string> before = ReadWholeFile(memo);
  if (before.ok()) {
    for (absl::string_view line : absl::StrSplit(*before, '\n', absl::SkipEmpty())) {
      if (!absl::StartsWith(line, absl::StrCat(driver, "\t"))) absl::StrAppend(&text, line, "\n");
    }
  }
  absl::StrAppend(&text, driver, "\t", absl::StrJoin(dirs, ":"), "\t", fingerprint, "\t",
                  absl::StrJoin(answers, "\t"), "\n");
  std::error_code ec;
  fs::create_directories(fs::path(memo).parent_path(), ec);
  (void)WriteFileAtomically(memo, text);  // only a shortcut
}

}  // namespace

absl::StatusOr<std::vector<ToolFile>> DriverPrograms(const std::string& compiler,
                                                     const ToolLookup& lookup) {
  std::string driver = RealPath(compiler);
  if (driver.empty()) return absl::NotFoundError(absl::StrCat("cannot find ", compiler));
  std::optional<std::vector<std::string>> answers;
  if (!lookup.programs_memo.empty()) answers = RecallPrograms(lookup.programs_memo, driver, lookup);
  if (!answers.has_value()) {
    std::vector<std::string> dirs = ProgramDirs(compiler);
    std::string fingerprint = DriverFingerprint(driver, dirs, lookup);
    // One process per name (gcc answers one -print-prog-name a run), all at once.
    answers.emplace(std::size(kDriverPrograms));
    std::vector<std::thread> asking;
    for (size_t i = 0; i < std::size(kDriverPrograms); ++i) {
      asking.emplace_back(
          [&, i] { (*answers)[i] = AskDriver(compiler, kDriverPrograms[i].second); });
    }
    for (std::thread& thread : asking) thread.join();
    // Unchanged while they were asked: else the next command asks again.
    if (!lookup.programs_memo.empty() && DriverFingerprint(driver, dirs, lookup) == fingerprint) {
      RememberPrograms(lookup.programs_memo, driver, dirs, fingerprint, *answers);
    }
  }
  std::vector<ToolFile> programs;
  for (size_t i = 0; i < std::size(kDriverPrograms); ++i) {
    std::string program = (*answers)[i];
    if (!program.empty() && program.find('/') == std::string::npos) {
      absl::StatusOr<std::string> found = FindCompiler(program, lookup);
      program = found.ok() ? *found : "";
    }
    programs.push_back({kDriverPrograms[i].first, program.empty() ? "" : RealPath(program)});
  }
  return programs;
}

namespace {

// The programs of `driver`'s with the given roles, each named `prefix` + role.
absl::Status AddDriverPrograms(const std::string& driver, const ToolLookup& lookup,
                               const std::vector<absl::string_view>& roles,
                               absl::string_view prefix, std::vector<ToolFile>& tools) {
  absl::StatusOr<std::vector<ToolFile>> programs = DriverPrograms(driver, lookup);
  if (!programs.ok()) return programs.status();
  for (ToolFile& program : *programs) {
    if (std::find(roles.begin(), roles.end(), program.role) == roles.end()) continue;
    if (program.role == "linker" && program.path.empty()) {
      return absl::NotFoundError(absl::StrCat(driver, " names no linker (-print-prog-name=ld)"));
    }
    tools.push_back({absl::StrCat(prefix, program.role), std::move(program.path)});
  }
  return absl::OkStatus();
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
  for (const std::string& root : {Get(lookup.env, "KCACHE_REAL_CUDA_HOME"),
                                  Get(lookup.env, "CUDA_HOME"), std::string("/usr/local/cuda")}) {
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
    // A link of objects runs only the linker; a compile its compiler proper and assembler.
    std::vector<absl::string_view> roles;
    if (command.kind != CompilerOutput::kLinkedLibrary) {
      roles = {command.c_language ? "cc1" : "cc1plus", "as"};
    }
    if (RunsLinker(command.kind)) roles.insert(roles.end(), {"linker", "collect2"});
    absl::Status added = AddDriverPrograms(compiler, lookup, roles, "", tools);
    if (!added.ok()) return added;
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
  absl::Status added = AddDriverPrograms(*host_path, lookup, {"cc1plus", "as"}, "host ", tools);
  if (!added.ok()) return added;
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

absl::StatusOr<CompilerOptionTable> NvccOptionTable(const std::string& nvcc,
                                                    const std::string& digest_hex,
                                                    const ToolLookup& lookup) {
  // The memo: one line per option, "name\t0" or "name\t1" (takes a value).
  std::string memo = lookup.options_memo.empty() || digest_hex.empty()
                         ? ""
                         : absl::StrCat(lookup.options_memo, "/nvcc-", digest_hex);
  if (!memo.empty()) {
    if (absl::StatusOr<std::string> text = ReadWholeFile(memo); text.ok()) {
      CompilerOptionTable table;
      for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
        std::pair<absl::string_view, absl::string_view> fields = absl::StrSplit(line, '\t');
        table.options.emplace_back(std::string(fields.first), fields.second == "1");
      }
      if (!table.options.empty() && std::is_sorted(table.options.begin(), table.options.end())) {
        return table;
      }
    }
  }
  absl::StatusOr<ProcessResult> run = RunCaptured({nvcc, "--help"});
  if (!run.ok()) return run.status();
  CompilerOptionTable table = ParseNvccHelp(run->stdout_text);
  if (run->exit_code != 0 || table.options.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(nvcc, " --help printed no option table (exit ", run->exit_code, ")"));
  }
  if (!memo.empty()) {
    std::string text;
    for (const auto& [name, takes_value] : table.options) {
      absl::StrAppend(&text, name, "\t", takes_value ? "1" : "0", "\n");
    }
    std::error_code ec;
    fs::create_directories(lookup.options_memo, ec);
    (void)WriteFileAtomically(memo, text);  // only a shortcut
  }
  return table;
}

}  // namespace kcache::objects
