#include "core/compiler_command.h"

#include <algorithm>
#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kcache {
namespace {

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
constexpr OptionSpec kNvccOptions[] = {
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
constexpr std::array<std::pair<absl::string_view, absl::string_view>, 41> kNvccLongNames = {{
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
constexpr GccValued kGccValued[] = {
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

constexpr absl::string_view kGccFlags[] = {
    "c",        "MD",         "pthread", "pedantic", "pedantic-errors", "w",        "ansi", "pipe",
    "nostdinc", "nostdinc++", "v",       "shared",   "static",          "rdynamic", "P",
};

// Prefixes of gcc options that take no separate value and are keyed as written.
constexpr absl::string_view kGccPrefixes[] = {"f", "W", "O", "m", "std=", "-std=", "-param="};

ParsedCompilerCommand Uncached(UncachedReason reason, absl::string_view arg) {
  ParsedCompilerCommand parsed;
  parsed.uncached = reason;
  parsed.detail = std::string(arg);
  return parsed;
}

// State shared by both families' option loops.
struct Parse {
  CompilerCommand command;
  bool compile = false;
  bool device_output = false;  // nvcc -cubin, -ptx, ...
  bool have_output = false;
  bool language_given = false;
  bool header_language = false;  // -x c-header / c++-header before the source
  bool shared = false;           // -shared
  std::string language;          // the last -x value
  std::vector<std::string> inputs;
  ParsedCompilerCommand failed;  // set when a reason was found
  bool failed_set = false;
  size_t index = 0;  // of the argument being parsed

  void Fail(UncachedReason reason, absl::string_view arg) {
    if (failed_set) return;
    failed = Uncached(reason, arg);
    failed_set = true;
  }

  // Applies an option's role; `keyed` is what goes into the key (unless the role drops it).
  void Apply(Role role, UncachedReason reason, absl::string_view arg, absl::string_view value,
             std::string keyed) {
    switch (role) {
      case Role::kCompile:
        compile = true;
        break;
      case Role::kDeviceOutput:
        device_output = true;
        break;
      case Role::kOutput:
        if (value == "-") Fail(UncachedReason::kStdin, arg);
        command.output = std::string(value);
        have_output = true;
        return;  // not keyed
      case Role::kDepFile:
        command.dep_file = std::string(value);
        return;  // not keyed
      case Role::kWriteDeps:
        command.writes_deps = true;
        break;
      case Role::kWriteUserDeps:
        command.writes_deps = true;
        command.user_only_deps_arg = static_cast<int>(index);
        break;
      case Role::kCcbin:
        command.ccbin = std::string(value);
        return;  // keyed by the compiler's content instead
      case Role::kHostOpts:
        for (absl::string_view option : absl::StrSplit(value, ',')) {
          option = absl::StripPrefix(absl::StripSuffix(option, "'"), "'");
          UncachedReason why;
          if (IsUncacheableHostOption(option, &why)) Fail(why, arg);
          if (option == "-g" || (absl::StartsWith(option, "-g") && option != "-g0")) {
            command.debug_info = true;
          }
        }
        break;
      case Role::kDepTarget:
        command.dep_targets_given = true;
        break;
      case Role::kPhonyDeps:
        command.phony_deps = true;
        break;
      case Role::kLanguage:
        language_given = value != "none";
        header_language = value == "c-header" || value == "c++-header";
        language = std::string(value);
        break;
      case Role::kDebug:
        command.debug_info = true;
        break;
      case Role::kUncached:
        Fail(reason, arg);
        break;
      case Role::kPlain:
        break;
    }
    command.keyed_args.push_back(std::move(keyed));
  }

  void Input(absl::string_view arg) {
    if (arg == "-") {
      Fail(UncachedReason::kStdin, arg);
      return;
    }
    command.keyed_args.push_back(absl::StrCat("\x02", arg));
    inputs.emplace_back(arg);
  }

  ParsedCompilerCommand Finish() {
    // Without -c, gcc compiles one source into a shared object (-shared) or a precompiled
    // header (-x c++-header); a link of objects or a query (`c++ a.o -shared -o x.so`,
    // `c++ --version`) is said to be one, whatever option of it the parser did not know.
    if (!compile && command.family == CompilerFamily::kGcc) {
      bool one_source = inputs.size() == 1 && (language_given || IsSourceFileName(inputs[0]));
      bool only_objects = !inputs.empty() && !language_given &&
                          std::all_of(inputs.begin(), inputs.end(), [](const std::string& input) {
                            return absl::EndsWith(input, ".o");
                          });
      if (header_language && one_source) {
        command.kind = CompilerOutput::kPrecompiledHeader;
      } else if (shared && (one_source || only_objects)) {
        command.kind = one_source ? CompilerOutput::kSharedLibrary : CompilerOutput::kLinkedLibrary;
        // What the linker is told past the driver (-Wl,--version-script=FILE, -Wl,-Map=FILE)
        // may read or write files its dependency output does not list, and a link-time
        // optimization runs lto1, a tool not keyed: never guessed at.
        for (const std::string& arg : command.args) {
          if (absl::StartsWith(arg, "-Wl,") || arg == "-Xlinker" ||
              absl::StartsWith(arg, "-fuse-ld") || absl::StartsWith(arg, "-flto")) {
            Fail(UncachedReason::kUnknownOption, arg);
          }
        }
      }
    }
    if (device_output && !compile) command.kind = CompilerOutput::kDeviceCode;
    bool builds = compile || command.kind != CompilerOutput::kObject;
    if (!builds && (!failed_set || failed.uncached == UncachedReason::kUnknownOption)) {
      return Uncached(UncachedReason::kNotACompile, "no -c");
    }
    if (failed_set) return failed;
    if (command.kind == CompilerOutput::kLinkedLibrary) {
      if (!have_output) return Uncached(UncachedReason::kNoOutput, "no -o");
      // A link reads no source: a dependency file asked of it would be gcc's to leave out.
      if (command.writes_deps) return Uncached(UncachedReason::kUnknownOption, "-MD on a link");
      command.objects = std::move(inputs);
      ParsedCompilerCommand parsed;
      parsed.command = std::move(command);
      return parsed;
    }
    if (inputs.empty()) return Uncached(UncachedReason::kNoSource, "no source file");
    if (inputs.size() > 1) return Uncached(UncachedReason::kSeveralInputs, inputs[1]);
    if (!language_given && !IsSourceFileName(inputs[0])) {
      return Uncached(UncachedReason::kSeveralInputs, inputs[0]);
    }
    if (!have_output) return Uncached(UncachedReason::kNoOutput, "no -o");
    command.source = inputs[0];
    command.c_language = language_given ? (language == "c" || language == "c-header")
                                        : absl::EndsWith(command.source, ".c");
    ParsedCompilerCommand parsed;
    parsed.command = std::move(command);
    return parsed;
  }
};

const OptionSpec* FindNvccOption(absl::string_view name) {
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
constexpr absl::string_view kNvccJoinable[] = {"I", "D", "U", "O", "L", "l"};

bool ParseNvccOption(Parse& p, const std::vector<std::string>& args, size_t& i) {
  absl::string_view arg = args[i];
  absl::string_view body = arg;
  if (!absl::ConsumePrefix(&body, "--")) body.remove_prefix(1);
  absl::string_view name = body, value;
  bool has_equals = false;
  if (size_t eq = body.find('='); eq != absl::string_view::npos) {
    name = body.substr(0, eq);
    value = body.substr(eq + 1);
    has_equals = true;
  }
  const OptionSpec* spec = FindNvccOption(name);
  if (spec == nullptr) {  // -DNAME=VALUE, -Idir, -O3
    for (absl::string_view prefix : kNvccJoinable) {
      if (absl::StartsWith(body, prefix) && body.size() > prefix.size()) {
        p.Apply(FindNvccOption(prefix)->role, U::kNone, arg, body.substr(prefix.size()),
                std::string(arg));
        return true;
      }
    }
  }
  if (spec == nullptr) return false;
  if (!spec->takes_value) {
    if (has_equals) return false;
    p.Apply(spec->role, spec->reason, arg, "", absl::StrCat("-", spec->name));
    return true;
  }
  if (!has_equals) {
    if (i + 1 >= args.size()) return false;
    value = args[++i];
  }
  if (spec->name == "arch" && value == "native") p.Fail(U::kNativeTarget, arg);  // this GPU's SM
  p.Apply(spec->role, spec->reason, arg, value, absl::StrCat("-", spec->name, "\x01", value));
  return true;
}

// An option of `learned` only: keyed as written, with its value when it takes one.
bool ParseLearnedOption(Parse& p, const CompilerOptionTable& learned,
                        const std::vector<std::string>& args, size_t& i) {
  absl::string_view arg = args[i];
  absl::string_view body = arg;
  if (!absl::ConsumePrefix(&body, "--")) body.remove_prefix(1);
  absl::string_view name = body;
  size_t eq = body.find('=');
  if (eq != absl::string_view::npos) name = body.substr(0, eq);
  bool takes_value = false;
  if (!learned.Find(name, &takes_value)) return false;
  if (!takes_value) {
    if (eq != absl::string_view::npos) return false;  // a value the tool says it does not take
    p.Apply(R::kPlain, U::kNone, arg, "", std::string(arg));
    return true;
  }
  if (eq != absl::string_view::npos) {
    p.Apply(R::kPlain, U::kNone, arg, body.substr(eq + 1), std::string(arg));
    return true;
  }
  if (i + 1 >= args.size()) return false;
  absl::string_view value = args[++i];
  p.Apply(R::kPlain, U::kNone, arg, value, absl::StrCat(arg, "\x01", value));
  return true;
}

bool ParseGccOption(Parse& p, const std::vector<std::string>& args, size_t& i) {
  absl::string_view arg = args[i];
  absl::string_view body = arg.substr(1);
  if (IsNativeTuning(arg)) {  // keyed by its expansion on this machine (the launcher's part)
    p.command.native_args.emplace_back(arg);
    p.Apply(R::kPlain, U::kNone, arg, "", std::string(arg));
    return true;
  }
  if (body == "shared") p.shared = true;
  UncachedReason why;
  if (IsUncacheableHostOption(arg, &why)) {
    p.Fail(why, arg);
    return true;
  }
  if (body == "E" || body == "M" || body == "MM") {
    p.Fail(U::kPreprocessOnly, arg);
    return true;
  }
  if (body == "S") {
    p.Fail(U::kOtherOutput, arg);
    return true;
  }
  if (body == "MMD") {
    p.Apply(R::kWriteUserDeps, U::kNone, arg, "", std::string(arg));
    return true;
  }
  for (const GccValued& valued : kGccValued) {
    if (!absl::StartsWith(body, valued.name)) continue;
    absl::string_view glued = body.substr(valued.name.size());
    if (glued.empty()) {
      if (i + 1 >= args.size()) return false;
      absl::string_view value = args[++i];
      p.Apply(valued.role, U::kNone, arg, value, absl::StrCat(arg, "\x01", value));
      return true;
    }
    // -include and -imacros take their file only as the next argument.
    if (valued.name != "include" && valued.name != "imacros") {
      p.Apply(valued.role, U::kNone, arg, glued, std::string(arg));
      return true;
    }
  }
  if (body == "c") {
    p.Apply(R::kCompile, U::kNone, arg, "", std::string(arg));
    return true;
  }
  if (body == "MD") {
    p.Apply(R::kWriteDeps, U::kNone, arg, "", std::string(arg));
    return true;
  }
  if (body == "MP") {
    p.Apply(R::kPhonyDeps, U::kNone, arg, "", std::string(arg));
    return true;
  }
  for (absl::string_view flag : kGccFlags) {
    if (body == flag) {
      p.Apply(R::kPlain, U::kNone, arg, "", std::string(arg));
      return true;
    }
  }
  if (absl::StartsWith(body, "g")) {
    p.Apply(body == "g0" ? R::kPlain : R::kDebug, U::kNone, arg, "", std::string(arg));
    return true;
  }
  for (absl::string_view prefix : kGccPrefixes) {
    if (absl::StartsWith(body, prefix)) {
      p.Apply(R::kPlain, U::kNone, arg, "", std::string(arg));
      return true;
    }
  }
  return false;
}

}  // namespace

absl::string_view CompilerFamilyName(CompilerFamily family) {
  return family == CompilerFamily::kNvcc ? "nvcc" : "gcc";
}

bool IsSourceFileName(absl::string_view path) {
  for (absl::string_view ext : {".c", ".cc", ".cpp", ".cxx", ".c++", ".cp", ".C", ".cu"}) {
    if (absl::EndsWith(path, ext)) return true;
  }
  return false;
}

std::string UncachedOptionName(absl::string_view detail) {
  if (absl::StartsWith(detail, "@")) return "@";
  if (detail.size() < 2 || detail[0] != '-' || detail.find(' ') != absl::string_view::npos) {
    return "";
  }
  return std::string(detail.substr(0, detail.find_first_of("=,")));
}

bool IsNativeTuning(absl::string_view option) {
  for (absl::string_view tuning : {"-march=", "-mcpu=", "-mtune="}) {
    if (absl::StartsWith(option, tuning) && option.substr(tuning.size()) == "native") return true;
  }
  return false;
}

bool IsUncacheableHostOption(absl::string_view option, UncachedReason* reason) {
  struct Rule {
    absl::string_view prefix;
    UncachedReason reason;
  };
  static constexpr Rule kRules[] = {
      {"-fprofile", U::kProfiling},
      {"--coverage", U::kProfiling},
      {"-ftest-coverage", U::kProfiling},
      {"-fauto-profile", U::kProfiling},
      {"-fplugin", U::kProfiling},
      {"-fcoverage", U::kProfiling},
      {"-pg", U::kProfiling},
      {"-p", U::kProfiling},
      {"-save-temps", U::kKeepTemps},
      {"-Wa,", U::kKeepTemps},
      {"-Wp,", U::kKeepTemps},
      {"-fdump-", U::kKeepTemps},
      {"-fstack-usage", U::kKeepTemps},
      {"-fcallgraph-info", U::kKeepTemps},
      {"-aux-info", U::kKeepTemps},
      {"-fsave-optimization-record", U::kKeepTemps},
      {"-gsplit-dwarf", U::kKeepTemps},
      {"-ftime-trace", U::kKeepTemps},
      {"-fopt-info", U::kKeepTemps},
      {"-fmodule", U::kKeepTemps},
      {"-fsanitize-coverage", U::kProfiling},
  };
  if (IsNativeTuning(option)) {
    *reason = U::kNativeTarget;  // the code is this CPU's: a hit elsewhere could not run
    return true;
  }
  for (const Rule& rule : kRules) {
    // "-p" alone is profiling; "-pthread"/"-pipe"/"-pedantic" are not.
    bool exact_only = rule.prefix == "-p" || rule.prefix == "-pg";
    if (exact_only ? option == rule.prefix : absl::StartsWith(option, rule.prefix)) {
      *reason = rule.reason;
      return true;
    }
  }
  return false;
}

bool CompilerOptionTable::Find(absl::string_view name, bool* takes_value) const {
  auto it =
      std::lower_bound(options.begin(), options.end(), name,
                       [](const std::pair<std::string, bool>& option, absl::string_view wanted) {
                         return absl::string_view(option.first) < wanted;
                       });
  if (it == options.end() || it->first != name) return false;
  *takes_value = it->second;
  return true;
}

CompilerOptionTable ParseNvccHelp(absl::string_view help_text) {
  CompilerOptionTable table;
  for (absl::string_view line : absl::StrSplit(help_text, '\n')) {
    if (!absl::StartsWith(line, "--")) continue;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    absl::string_view long_name = absl::StripPrefix(words[0], "--");
    if (long_name.empty()) continue;
    // "(-short)" closes the line; what stands between the names is the value's description.
    size_t last = words.size();
    absl::string_view short_name;
    if (words.size() >= 2 && absl::StartsWith(words.back(), "(-") &&
        absl::EndsWith(words.back(), ")")) {
      short_name = words.back().substr(2, words.back().size() - 3);
      last = words.size() - 1;
    } else if (words.size() == 2 && words[1] == words[0]) {
      last = 1;  // "--no-align-double --no-align-double": a flag with one spelling
    }
    bool takes_value = last > 1;
    table.options.emplace_back(std::string(long_name), takes_value);
    if (!short_name.empty() && short_name != long_name) {
      table.options.emplace_back(std::string(short_name), takes_value);
    }
  }
  std::sort(table.options.begin(), table.options.end());
  table.options.erase(std::unique(table.options.begin(), table.options.end(),
                                  [](const auto& a, const auto& b) { return a.first == b.first; }),
                      table.options.end());
  return table;
}

ParsedCompilerCommand ParseCompilerCommand(CompilerFamily family,
                                           const std::vector<std::string>& args,
                                           const CompilerOptionTable* learned) {
  Parse p;
  p.command.family = family;
  p.command.args = args;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    p.index = i;
    if (absl::StartsWith(arg, "@")) {
      p.Fail(U::kResponseFile, arg);
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      p.Input(arg);
      continue;
    }
    bool known =
        family == CompilerFamily::kNvcc ? ParseNvccOption(p, args, i) : ParseGccOption(p, args, i);
    if (!known && learned != nullptr) known = ParseLearnedOption(p, *learned, args, i);
    if (!known) p.Fail(U::kUnknownOption, arg);
  }
  return p.Finish();
}

}  // namespace kcache
