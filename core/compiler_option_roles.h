// The compiler options ParseCompilerCommand (compiler_command.h) knows, and what each does to
// the parse: nvcc's, with their long spellings, and gcc's (c++ and cc) with a value, without
// one, and the prefixes keyed as written. Tables only; internal to compiler_command.cc and its
// tests. An option in none of them is unknown: the command is not cached (kUnknownOption),
// unless nvcc's own --help lists it (CompilerOptionTable).
#ifndef KCACHE_CORE_COMPILER_OPTION_ROLES_H_
#define KCACHE_CORE_COMPILER_OPTION_ROLES_H_

#include <array>
#include <cstdint>
#include <utility>

#include "absl/strings/string_view.h"
#include "core/compiler_command.h"

namespace kcache::compiler_options {

// What an option does to the parse.
enum class Role : uint8_t {
  kPlain,          // keyed as written, nothing else
  kCompile,        // -c, -dc: the mode we cache
  kDeviceOutput,   // nvcc -cubin, -ptx, -fatbin, -optix-ir, -ltoir: device code only at -o
  kOutput,         // -o FILE
  kDepFile,        // -MF FILE
  kWriteDeps,      // -MD
  kWriteUserDeps,  // -MMD: served as -MD (CompilerCommand::user_only_deps_arg)
  kCcbin,          // nvcc -ccbin DIR|FILE
  kHostOpts,       // nvcc -Xcompiler A,B: checked against IsUncacheableHostOption
  kDepTarget,      // -MT, -MQ: the dependency file's targets
  kPhonyDeps,      // -MP
  kLanguage,       // -x LANG: any input is then a source
  kDebug,          // -g, -G, -lineinfo
  kUncached,       // never cached, for `reason`
};

struct OptionSpec {
  absl::string_view name;  // without the leading dashes
  bool takes_value;        // "-name VALUE" or "-name=VALUE"
  Role role;
  UncachedReason reason = UncachedReason::kNone;
};

using R = Role;
using U = UncachedReason;

// nvcc's options (its long spellings map onto these in kNvccLongNames).
inline constexpr OptionSpec kNvccOptions[] = {
    {"c", false, R::kCompile},
    {"dc", false, R::kCompile},
    {"o", true, R::kOutput},
    {"MF", true, R::kDepFile},
    {"MD", false, R::kWriteDeps},
    {"MT", true, R::kDepTarget},
    {"MP", false, R::kPhonyDeps},
    {"ccbin", true, R::kCcbin},
    {"Xcompiler", true, R::kHostOpts},
    {"x", true, R::kLanguage},
    {"I", true, R::kPlain},
    {"D", true, R::kPlain},
    {"U", true, R::kPlain},
    {"include", true, R::kPlain},
    {"isystem", true, R::kPlain},
    {"Xptxas", true, R::kPlain},
    {"Xcudafe", true, R::kPlain},
    {"Xnvlink", true, R::kPlain},
    {"Xfatbin", true, R::kPlain},
    {"gencode", true, R::kPlain},
    {"arch", true, R::kPlain},
    {"code", true, R::kPlain},
    {"std", true, R::kPlain},
    {"maxrregcount", true, R::kPlain},
    {"t", true, R::kPlain},
    {"split-compile", true, R::kPlain},
    {"ftz", true, R::kPlain},
    {"prec-div", true, R::kPlain},
    {"prec-sqrt", true, R::kPlain},
    {"fmad", true, R::kPlain},
    {"rdc", true, R::kPlain},
    {"default-stream", true, R::kPlain},
    {"diag-suppress", true, R::kPlain},
    {"diag-error", true, R::kPlain},
    {"diag-warn", true, R::kPlain},
    {"m", true, R::kPlain},
    {"O", true, R::kPlain},
    {"w", false, R::kPlain},
    {"g", false, R::kDebug},
    {"G", false, R::kDebug},
    {"lineinfo", false, R::kDebug},
    {"use_fast_math", false, R::kPlain},
    {"expt-relaxed-constexpr", false, R::kPlain},
    {"expt-extended-lambda", false, R::kPlain},
    {"extended-lambda", false, R::kPlain},
    {"allow-unsupported-compiler", false, R::kPlain},
    {"Werror", false, R::kPlain},
    {"Wno-deprecated-gpu-targets", false, R::kPlain},
    {"Wno-deprecated-declarations", false, R::kPlain},
    {"Wreorder", false, R::kPlain},
    {"res-usage", false, R::kPlain},
    {"src-in-ptx", false, R::kPlain},
    {"restrict", false, R::kPlain},
    {"display-error-number", false, R::kPlain},
    {"no-display-error-number", false, R::kPlain},
    {"extra-device-vectorization", false, R::kPlain},
    {"dlto", false, R::kPlain},
    {"m64", false, R::kPlain},
    {"forward-unknown-to-host-compiler", false, R::kPlain},  // CMake passes it
    {"E", false, R::kUncached, U::kPreprocessOnly},
    {"M", false, R::kUncached, U::kPreprocessOnly},
    {"MM", false, R::kUncached, U::kPreprocessOnly},
    {"MMD", false, R::kWriteUserDeps},
    {"keep", false, R::kUncached, U::kKeepTemps},
    {"keep-dir", true, R::kUncached, U::kKeepTemps},
    {"save-temps", false, R::kUncached, U::kKeepTemps},
    {"dryrun", false, R::kUncached, U::kKeepTemps},
    {"time", true, R::kUncached, U::kKeepTemps},
    {"fdevice-time-trace", true, R::kUncached, U::kKeepTemps},
    {"ptx", false, R::kDeviceOutput},
    {"cubin", false, R::kDeviceOutput},
    {"fatbin", false, R::kDeviceOutput},
    {"optix-ir", false, R::kDeviceOutput},
    {"ltoir", false, R::kDeviceOutput},
    {"lib", false, R::kUncached, U::kOtherOutput},
    {"link", false, R::kUncached, U::kOtherOutput},
    {"dlink", false, R::kUncached, U::kOtherOutput},
    {"run", false, R::kUncached, U::kOtherOutput},
    {"odir", true, R::kUncached, U::kOtherOutput},
    {"optf", true, R::kUncached, U::kResponseFile},
    {"pg", false, R::kUncached, U::kProfiling},
};

// nvcc's long spellings of the options above.
inline constexpr std::array<std::pair<absl::string_view, absl::string_view>, 41> kNvccLongNames = {{
    {"compile", "c"},
    {"device-c", "dc"},
    {"output-file", "o"},
    {"dependency-output", "MF"},
    {"generate-dependencies-with-compile", "MD"},
    {"dependency-target-name", "MT"},
    {"generate-dependency-targets", "MP"},
    {"compiler-bindir", "ccbin"},
    {"compiler-options", "Xcompiler"},
    {"include-path", "I"},
    {"define-macro", "D"},
    {"undefine-macro", "U"},
    {"pre-include", "include"},
    {"system-include", "isystem"},
    {"ptxas-options", "Xptxas"},
    {"nvlink-options", "Xnvlink"},
    {"fatbin-options", "Xfatbin"},
    {"generate-code", "gencode"},
    {"gpu-architecture", "arch"},
    {"gpu-code", "code"},
    {"threads", "t"},
    {"relocatable-device-code", "rdc"},
    {"machine", "m"},
    {"optimize", "O"},
    {"disable-warnings", "w"},
    {"debug", "g"},
    {"device-debug", "G"},
    {"generate-line-info", "lineinfo"},
    {"resource-usage", "res-usage"},
    {"source-in-ptx", "src-in-ptx"},
    {"preprocess", "E"},
    {"generate-dependencies", "M"},
    {"generate-nonsystem-dependencies", "MM"},
    {"generate-nonsystem-dependencies-with-compile", "MMD"},
    {"clean-targets", "dryrun"},
    {"device-link", "dlink"},
    {"output-directory", "odir"},
    {"options-file", "optf"},
    {"profile", "pg"},
    {"x", "x"},
    {"std", "std"},
}};

// gcc's options with a value ("-I dir", "-Idir"; those marked joinable also take it glued on).
struct GccValued {
  absl::string_view name;
  Role role;
};
// Longer names before their prefixes ("iwithprefixbefore" before "iwithprefix"). Options that
// name files the compile reads or programs it runs (-B, -specs=, -wrapper, --sysroot) are keyed
// as written: what they make it read and run is observed (engine/keys/observed_manifest.h).
inline constexpr GccValued kGccValued[] = {
    {"o", R::kOutput},
    {"MF", R::kDepFile},
    {"x", R::kLanguage},
    {"I", R::kPlain},
    {"D", R::kPlain},
    {"U", R::kPlain},
    {"MT", R::kDepTarget},
    {"MQ", R::kDepTarget},
    {"L", R::kPlain},
    {"l", R::kPlain},
    {"isystem", R::kPlain},
    {"idirafter", R::kPlain},
    {"iquote", R::kPlain},
    {"isysroot", R::kPlain},
    {"include", R::kPlain},
    {"imacros", R::kPlain},
    {"iwithprefixbefore", R::kPlain},
    {"iwithprefix", R::kPlain},
    {"iprefix", R::kPlain},
    {"imultilib", R::kPlain},
    {"B", R::kPlain},
    {"specs", R::kPlain},
    {"-specs", R::kPlain},
    {"-sysroot", R::kPlain},
    {"wrapper", R::kPlain},
    {"Xclang", R::kPlain},
    {"Xpreprocessor", R::kPlain},
    {"Xassembler", R::kPlain},
    {"Xlinker", R::kPlain},
};

inline constexpr absl::string_view kGccFlags[] = {
    "c",        "MD",         "pthread", "pedantic", "pedantic-errors", "w",        "ansi", "pipe",
    "nostdinc", "nostdinc++", "v",       "shared",   "static",          "rdynamic", "P",
};

// Prefixes of gcc options that take no separate value and are keyed as written.
inline constexpr absl::string_view kGccPrefixes[] = {"f",    "W",     "O",      "m",
                                                     "std=", "-std=", "-param="};

inline const OptionSpec* FindNvccOption(absl::string_view name) {
  for (const auto& [long_name, short_name] : kNvccLongNames) {
    if (name == long_name) {
      name = short_name;
      break;
    }
  }
  for (const OptionSpec& spec : kNvccOptions) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// Short nvcc options that also take their value glued on: -Idir, -DX, -O3, -lm.
inline constexpr absl::string_view kNvccJoinable[] = {"I", "D", "U", "O", "L", "l"};

}  // namespace kcache::compiler_options

#endif  // KCACHE_CORE_COMPILER_OPTION_ROLES_H_
