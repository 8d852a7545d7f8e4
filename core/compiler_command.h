// Reading a compiler command line (nvcc, or a gcc-like c++/cc): is it one cacheable compile
// of one source to one output, and if so, what are its parts. Pure logic, no I/O: the
// launcher (engine/launcher, with engine/keys) adds the file system, the tools and the environment.
//
// Cacheable: -o FILE, only options known here (docs/torch-extensions.md lists them) or that
// the compiler's own option table names (CompilerOptionTable), and one
// of: one source and -c (nvcc also -dc), an object; for nvcc, one source and -cubin, -ptx,
// -fatbin, -optix-ir or -ltoir, its device code; for gcc, -shared without -c, one source
// compiled and linked into a shared object, or object files (.o, no source) linked into one
// (no -Wl, options: the linker's inputs are keyed from its own dependency output, and nothing
// else it reads may go unseen); for gcc, one source with -x c-header / c++-header without -c,
// a precompiled header. Everything else is uncached with a reason: a wrong hit is the worst
// bug, so an option neither this file nor the compiler's own table knows is never guessed at.
#ifndef KCACHE_CORE_COMPILER_COMMAND_H_
#define KCACHE_CORE_COMPILER_COMMAND_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace kcache {

enum class CompilerFamily : uint8_t {
  kNvcc = 1,  // NVIDIA's nvcc driver
  kGcc = 2,   // gcc, g++, cc, c++ (and clang, which takes the same options)
};
absl::string_view CompilerFamilyName(CompilerFamily family);  // "nvcc", "gcc"

// What a cacheable command writes at -o.
enum class CompilerOutput : uint8_t {
  kObject = 0,             // -c (nvcc also -dc)
  kSharedLibrary = 1,      // gcc -shared without -c: one source compiled and linked
  kPrecompiledHeader = 2,  // gcc -x c-header / c++-header without -c
  kLinkedLibrary = 3,      // gcc -shared without -c, object files only: a link, no source
  kDeviceCode = 4,         // nvcc -cubin, -ptx, -fatbin, -optix-ir, -ltoir without -c: one
                           // source's device code (DeepGEMM's JIT compiles -cubin)
};

// Whether the command runs the linker: its inputs then include what the linker read.
constexpr bool RunsLinker(CompilerOutput kind) {
  return kind == CompilerOutput::kSharedLibrary || kind == CompilerOutput::kLinkedLibrary;
}

// Why a command is run uncached. Numbered and stable: counted by name.
enum class UncachedReason : uint8_t {
  kNone = 0,
  kNotACompile = 1,       // no -c: a link of objects, a version query, a plain `c++`
  kPreprocessOnly = 2,    // -E, -M, -MM (no object is made)
  kOtherOutput = 3,       // -S, -ptx, -cubin, -fatbin, -lib, -dlink, ...: not an object
  kNoSource = 4,          // no source file among the arguments
  kSeveralInputs = 5,     // more than one input (or an object/library among them)
  kStdin = 6,             // source or output "-"
  kKeepTemps = 7,         // --keep, -save-temps, -dryrun, -Wa/-Wp: extra or missing outputs
  kResponseFile = 8,      // @file or --options-file: arguments we cannot see
  kProfiling = 9,         // profiling, coverage, plugins, profile-guided use
  kUnknownOption = 10,    // an option this parser does not know
  kNoOutput = 11,         // no -o (an implicit output name)
  kUserOnlyDeps = 12,     // no longer given: -MMD runs as -MD (CompilerCommand::
                          // user_only_deps_arg); kept for its number and counter
  kTimeMacros = 13,       // __DATE__/__TIME__/__TIMESTAMP__ in the source or a header
  kUnreadableInput = 14,  // the source, a header or a tool could not be read
  kInputChanged = 15,     // the source or a header changed while it compiled: not stored
  kNativeTarget = 16,     // nvcc -arch=native, -Xcompiler -march/-mcpu/-mtune=native: this
                          // machine's GPU or CPU decides the output, and the key cannot see
                          // which (gcc's own -march=native is keyed by its expansion)
};
inline constexpr int kUncachedReasonCount = 17;
// "unknown_option", ...: the one place reasons are named. The launchers' KCACHE_LOG lines say
// the name, and kcached counts a reason under it (objects.uncached_<name> and
// kcache_launcher_uncached_total{reason="<name>"}), so a name is as stable as its number.
// "unknown" for a number past the last reason.
constexpr absl::string_view UncachedReasonName(UncachedReason reason) {
  constexpr absl::string_view kNames[kUncachedReasonCount] = {
      "none",           "not_a_compile", "preprocess_only", "other_output",  "no_source",
      "several_inputs", "stdin",         "keep_temps",      "response_file", "profiling",
      "unknown_option", "no_output",     "user_only_deps",  "time_macros",   "unreadable_input",
      "input_changed",  "native_target",
  };
  size_t index = static_cast<size_t>(reason);
  return index < kUncachedReasonCount ? kNames[index] : "unknown";
}

// One cacheable compile, as parsed. Paths are as written (relative to the command's cwd).
struct CompilerCommand {
  CompilerFamily family = CompilerFamily::kGcc;
  CompilerOutput kind = CompilerOutput::kObject;
  std::vector<std::string> args;     // every argument after the compiler, unchanged
  std::string source;                // the one source file; "" for kLinkedLibrary
  std::vector<std::string> objects;  // kLinkedLibrary: the object files linked, as written
  std::string output;                // -o
  std::string dep_file;              // -MF value; "" when none was given
  bool writes_deps = false;          // -MD or -MMD (and nvcc's long spellings)
  // Index in `args` of a -MMD (dependencies without system headers), or -1. The launcher runs
  // the compiler with -MD there instead: the manifest needs every header, and the dependency
  // file then lists system headers too (ninja and make read it the same).
  int user_only_deps_arg = -1;
  // gcc compiles the source as C (a .c file, -x c, -x c-header): its compiler proper is cc1,
  // not cc1plus.
  bool c_language = false;
  // -MT or -MQ given (nvcc: -MT): the dependency file's targets are those, keyed with the
  // arguments. Without them the compiler names the output (-o) as written.
  bool dep_targets_given = false;
  bool phony_deps = false;  // -MP: a phony target for each dependency but the source
  std::string ccbin;        // nvcc -ccbin / --compiler-bindir value; "" when absent
  bool debug_info = false;  // -g (not -g0), -G, -lineinfo: the output holds paths
  // gcc's -march=native, -mtune=native, -mcpu=native, as written and in order: the launcher
  // keys what the compiler expands them to on this machine (its CPU model and features), so a
  // pod on another CPU misses.
  std::vector<std::string> native_args;
  // The arguments that go into the key: `args` without the output (-o FILE), the dependency
  // file name (-MF FILE) and -ccbin (its compiler is keyed by content), each option and its
  // value as one string ("-I" "x" -> "-Ix" style: "-I\x01x"), in the order given.
  std::vector<std::string> keyed_args;
};

// Options a compiler says it takes (its own --help), beyond the ones this file knows: each
// name without its leading dashes (long and short spellings both), and whether it takes a
// value ("--name VALUE", "--name=VALUE"). A command's option found only here is keyed as
// written, with its value: the launcher observes what it makes the compile read (keyed) and
// write (a compile that writes besides its outputs is not stored), so an option of a newer
// toolkit is served the day it ships instead of being refused.
struct CompilerOptionTable {
  std::vector<std::pair<std::string, bool>> options;  // (name, takes a value), sorted by name
  // Whether `name` is in the table; *takes_value then says if it takes one.
  bool Find(absl::string_view name, bool* takes_value) const;
};

// The table `nvcc --help` prints: each line "--long-name [VALUE] (-short)" (a VALUE such as
// "<file>", "{true|false}", "[a,b]" or "entry,..." means it takes one). Lines of another shape
// are skipped; an empty table when none is found.
CompilerOptionTable ParseNvccHelp(absl::string_view help_text);

struct ParsedCompilerCommand {
  UncachedReason uncached = UncachedReason::kNone;
  std::string detail;       // when uncached: the argument that decided it
  CompilerCommand command;  // meaningful only when uncached == kNone
};

// Parses `args` (without argv[0]) of a `family` compiler. `learned` (may be null): what the
// compiler itself says of options this file does not know (nvcc's: ParseNvccHelp); without
// it such an option is kUnknownOption.
ParsedCompilerCommand ParseCompilerCommand(CompilerFamily family,
                                           const std::vector<std::string>& args,
                                           const CompilerOptionTable* learned = nullptr);

// True for the file names a compile takes as its source: .c .cc .cpp .cxx .c++ .cp .C .cu.
bool IsSourceFileName(absl::string_view path);

// What the command's outputs are named by in listings, logs and `kcache explain`: the source,
// or for a link of objects its output.
inline const std::string& CommandSubject(const CompilerCommand& command) {
  return command.kind == CompilerOutput::kLinkedLibrary ? command.output : command.source;
}

// The option a parse's detail (ParsedCompilerCommand::detail) names, as kcached counts it:
// up to its '=' or ',' ("-fprofile-use=x" -> "-fprofile-use", "-Wa,-a" -> "-Wa"), "@" for a
// response file; "" when the detail is no option ("no -o", a source's name).
std::string UncachedOptionName(absl::string_view detail);

// -march=native, -mcpu=native or -mtune=native: this machine's CPU picks the code.
bool IsNativeTuning(absl::string_view option);

// A gcc option that must never be cached wherever it appears (directly or through nvcc's
// -Xcompiler): profiling, coverage, plugins, profile use, extra outputs. Sets *reason.
bool IsUncacheableHostOption(absl::string_view option, UncachedReason* reason);

}  // namespace kcache

#endif  // KCACHE_CORE_COMPILER_COMMAND_H_
