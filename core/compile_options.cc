#include "core/compile_options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kcache {
namespace {

// What kernel specs may carry, as shown in error messages.
constexpr char kAllowedSummary[] =
    "allowed: -std=c++{11,14,17,20}, -DNAME[=VALUE], -UNAME, --use_fast_math, "
    "--ftz/--prec-div/--prec-sqrt/--fmad=true|false, -default-device, -rdc=true|false, "
    "--extra-device-vectorization, -lineinfo, --dopt=on, --restrict, -w, "
    "--maxrregcount=N, -Xptxas=-v (long and short spellings)";

// Options that take no value.
constexpr absl::string_view kFlags[] = {
    "--use_fast_math",
    "-use_fast_math",
    "-default-device",
    "--device-as-default-execution-space",
    "--extra-device-vectorization",
    "-extra-device-vectorization",
    "-lineinfo",
    "--generate-line-info",
    "--restrict",
    "-restrict",
    "-w",
    "--disable-warnings",
    "-Xptxas=-v",
    "--ptxas-options=-v",
};

// Options written NAME=true|false.
constexpr absl::string_view kBoolOptions[] = {
    "--ftz",      "-ftz",   "--prec-div", "-prec-div", "--prec-sqrt",
    "-prec-sqrt", "--fmad", "-fmad",      "-rdc",      "--relocatable-device-code",
};

// Options refused for a reason more specific than "not in the list". Matched as the whole
// option or as its NAME before '='.
struct Refusal {
  absl::string_view name;
  absl::string_view reason;
};
constexpr char kTargetReason[] =
    "the target architecture is a field of the request (e.g. --arch 8.6), never an option";
constexpr char kIncludeReason[] =
    "include paths are not accepted: send headers by name with the kernel spec";
constexpr char kFileReason[] = "it names or writes a file on the compiling machine";
constexpr char kDltoReason[] =
    "LTO-IR is chosen by the daemon: ask for an LTO-IR artifact instead of passing -dlto";

constexpr char kNvrtcRejectsReason[] =
    "NVRTC 13.0 rejects it (device code is optimized by default; the only --dopt value NVRTC "
    "accepts is on)";
constexpr Refusal kRefusals[] = {
    {"-O0", kNvrtcRejectsReason},
    {"-O1", kNvrtcRejectsReason},
    {"-O2", kNvrtcRejectsReason},
    {"-O3", kNvrtcRejectsReason},
    {"-arch", kTargetReason},
    {"--gpu-architecture", kTargetReason},
    {"-I", kIncludeReason},
    {"--include-path", kIncludeReason},
    {"-include", kFileReason},
    {"--pre-include", kFileReason},
    {"-fdevice-time-trace", kFileReason},
    {"--fdevice-time-trace", kFileReason},
    {"-time", kFileReason},
    {"--time", kFileReason},
    {"-pch", kFileReason},
    {"--pch", kFileReason},
    {"-pch-dir", kFileReason},
    {"--pch-dir", kFileReason},
    {"-create-pch", kFileReason},
    {"--create-pch", kFileReason},
    {"-use-pch", kFileReason},
    {"--use-pch", kFileReason},
    {"-dlto", kDltoReason},
    {"--dlink-time-opt", kDltoReason},
    {"-gen-opt-lto", kDltoReason},
    {"--gen-opt-lto", kDltoReason},
};

// Written alone, these expect their value as the next option; NVRTC takes each option as one
// string, so the value must be in the same one.
struct SplitForm {
  absl::string_view name;
  absl::string_view write_as;
};
constexpr SplitForm kSplitForms[] = {
    {"-D", "-DNAME or -DNAME=VALUE"},
    {"--define-macro", "--define-macro=NAME[=VALUE]"},
    {"-U", "-UNAME"},
    {"--undefine-macro", "--undefine-macro=NAME"},
    {"-std", "-std=c++17"},
    {"--std", "--std=c++17"},
    {"-Xptxas", "-Xptxas=-v"},
    {"--ptxas-options", "--ptxas-options=-v"},
    {"--maxrregcount", "--maxrregcount=N"},
    {"-maxrregcount", "-maxrregcount=N"},
    {"--dopt", "--dopt=on"},
    {"-dopt", "-dopt=on"},
};

absl::Status Refuse(absl::string_view option, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat("compile option \"", absl::CEscape(option), "\" is not allowed: ", reason));
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

template <size_t N>
bool Contains(const absl::string_view (&list)[N], absl::string_view s) {
  for (absl::string_view item : list) {
    if (item == s) return true;
  }
  return false;
}

// -DNAME, -DNAME=VALUE, --define-macro=NAME[=VALUE]; `def` is what follows the prefix.
absl::Status CheckDefine(absl::string_view option, absl::string_view def) {
  absl::string_view name = def.substr(0, def.find('='));
  if (!IsIdentifier(name)) {
    return Refuse(option, "a macro name must be a C identifier (write -DNAME or -DNAME=VALUE)");
  }
  return absl::OkStatus();
}

// NAME=VALUE options; `name` and `value` split at the first '='.
absl::Status CheckValued(absl::string_view option, absl::string_view name,
                         absl::string_view value) {
  if (Contains(kBoolOptions, name)) {
    if (value == "true" || value == "false") return absl::OkStatus();
    return Refuse(option, absl::StrCat(name, " takes true or false"));
  }
  if (name == "-std" || name == "--std") {
    if (value == "c++11" || value == "c++14" || value == "c++17" || value == "c++20") {
      return absl::OkStatus();
    }
    return Refuse(option, "the language dialect must be c++11, c++14, c++17 or c++20");
  }
  if (name == "--dopt" || name == "-dopt") {
    if (value == "on") return absl::OkStatus();
    if (value == "off") return Refuse(option, kNvrtcRejectsReason);
    return Refuse(option, absl::StrCat(name, " takes on (the only value NVRTC 13.0 accepts)"));
  }
  if (name == "--maxrregcount" || name == "-maxrregcount") {
    int n = 0;
    if (absl::SimpleAtoi(value, &n) && n >= 1 && n <= 255 &&
        value.find_first_not_of("0123456789") == absl::string_view::npos) {
      return absl::OkStatus();
    }
    return Refuse(option, "--maxrregcount takes a register count from 1 to 255");
  }
  if (name == "--define-macro") return CheckDefine(option, value);
  if (name == "--undefine-macro") {
    if (IsIdentifier(value)) return absl::OkStatus();
    return Refuse(option, "a macro name must be a C identifier");
  }
  if (name == "-Xptxas" || name == "--ptxas-options") {
    return Refuse(option, "the only ptxas option allowed is -v (write -Xptxas=-v)");
  }
  return Refuse(option, absl::StrCat("it is not in the allowlist; ", kAllowedSummary));
}

absl::Status CheckOption(absl::string_view option) {
  if (option.empty()) return Refuse(option, "options must not be empty");
  for (char c : option) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Refuse(option, "options must not contain control characters (NUL, newline, ...)");
    }
  }
  absl::string_view name = option.substr(0, option.find('='));
  for (const Refusal& r : kRefusals) {
    if (name == r.name) return Refuse(option, r.reason);
  }
  // -I/usr/include, -arch=sm_80 / -archsm_80 and similar glued spellings.
  if (absl::StartsWith(option, "-I")) return Refuse(option, kIncludeReason);
  if (absl::StartsWith(option, "-arch")) return Refuse(option, kTargetReason);
  for (const SplitForm& split : kSplitForms) {
    if (option == split.name) {
      return Refuse(option, absl::StrCat("NVRTC takes each option as one string, so the value "
                                         "goes in the same option: write ",
                                         split.write_as));
    }
  }
  if (Contains(kFlags, option)) return absl::OkStatus();
  if (absl::StartsWith(option, "-D") && !absl::StartsWith(option, "--")) {
    return CheckDefine(option, option.substr(2));
  }
  if (absl::StartsWith(option, "-U") && !absl::StartsWith(option, "--")) {
    if (IsIdentifier(option.substr(2))) return absl::OkStatus();
    return Refuse(option, "a macro name must be a C identifier (write -UNAME)");
  }
  if (name.size() < option.size()) {
    return CheckValued(option, name, option.substr(name.size() + 1));
  }
  return Refuse(option, absl::StrCat("it is not in the allowlist; ", kAllowedSummary));
}

}  // namespace

absl::Status ValidateCompileOptions(const std::vector<std::string>& options) {
  for (const std::string& option : options) {
    if (absl::Status s = CheckOption(option); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kcache
