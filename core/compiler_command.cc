#include "core/compiler_command.h"

#include <algorithm>
#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/compiler_option_roles.h"

namespace kcache {
namespace {

using compiler_options::FindNvccOption;
using compiler_options::GccValued;
using compiler_options::kGccFlags;
using compiler_options::kGccPrefixes;
using compiler_options::kGccValued;
using compiler_options::kNvccJoinable;
using compiler_options::OptionSpec;
using compiler_options::Role;
using R = Role;
using U = UncachedReason;

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
