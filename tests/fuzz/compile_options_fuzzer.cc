// Fuzzes the option allowlist (core/compile_options.h). The input is options, one per line.
// Checked against the allowlist as its header writes it, reimplemented here independently:
// ValidateCompileOptions accepts an option exactly when that grammar does, never an option
// that names a file, an include path or a target, and a list exactly when every option in it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/compile_options.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

bool OneOf(absl::string_view s, std::initializer_list<absl::string_view> list) {
  for (absl::string_view item : list) {
    if (s == item) return true;
  }
  return false;
}

// The grammar of core/compile_options.h, written from its comment, not from its code.
bool Allowed(absl::string_view option) {
  for (char c : option) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  if (OneOf(option,
            {"--use_fast_math", "-use_fast_math", "-default-device",
             "--device-as-default-execution-space", "--extra-device-vectorization",
             "-extra-device-vectorization", "-lineinfo", "--generate-line-info", "--restrict",
             "-restrict", "-w", "--disable-warnings", "-Xptxas=-v", "--ptxas-options=-v"})) {
    return true;
  }
  size_t eq = option.find('=');
  absl::string_view name = option.substr(0, eq);
  absl::string_view value = eq == absl::string_view::npos ? "" : option.substr(eq + 1);
  // -D<name>[=value] and -U<name>, where <name> is whatever follows (not a long option).
  if (absl::StartsWith(option, "-D") && !absl::StartsWith(option, "--")) {
    absl::string_view define = option.substr(2);
    return IsIdentifier(define.substr(0, define.find('=')));
  }
  if (absl::StartsWith(option, "-U") && !absl::StartsWith(option, "--")) {
    return IsIdentifier(option.substr(2));
  }
  if (eq == absl::string_view::npos) return false;
  if (OneOf(name, {"--ftz", "-ftz", "--prec-div", "-prec-div", "--prec-sqrt", "-prec-sqrt",
                   "--fmad", "-fmad", "-rdc", "--relocatable-device-code"})) {
    return value == "true" || value == "false";
  }
  if (OneOf(name, {"-std", "--std"})) return OneOf(value, {"c++11", "c++14", "c++17", "c++20"});
  if (OneOf(name, {"--dopt", "-dopt"})) return value == "on";
  if (OneOf(name, {"--maxrregcount", "-maxrregcount"})) {
    if (value.empty() || value.find_first_not_of("0123456789") != absl::string_view::npos) {
      return false;
    }
    absl::string_view digits = value.substr(std::min(value.find_first_not_of('0'), value.size()));
    if (digits.empty() || digits.size() > 3) return false;
    int n = std::stoi(std::string(digits));
    return n >= 1 && n <= 255;
  }
  if (name == "--define-macro") return IsIdentifier(value.substr(0, value.find('=')));
  if (name == "--undefine-macro") return IsIdentifier(value);
  return false;
}

// Never allowed, whatever else the list says: what names or writes a file, include paths,
// the target architecture, LTO.
bool Dangerous(absl::string_view option) {
  absl::string_view name = option.substr(0, option.find('='));
  if (absl::StartsWith(option, "-D") || absl::StartsWith(option, "--define-macro=")) return false;
  for (absl::string_view bad : {"-I",
                                "--include",
                                "-include",
                                "--pre-include",
                                "-arch",
                                "--gpu-architecture",
                                "-o",
                                "--output",
                                "-fdevice-time-trace",
                                "--fdevice-time-trace",
                                "-time",
                                "--time",
                                "-pch",
                                "--pch",
                                "-create-pch",
                                "--create-pch",
                                "-use-pch",
                                "--use-pch",
                                "-dlto",
                                "--dlink-time-opt",
                                "-gen-opt-lto",
                                "--gen-opt-lto"}) {
    if (absl::StartsWith(name, bad)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> options =
      absl::StrSplit(absl::string_view(reinterpret_cast<const char*>(data), size), '\n');
  bool all_allowed = true;
  for (const std::string& option : options) {
    absl::Status status = kcache::ValidateCompileOptions({option});
    bool allowed = Allowed(option);
    FUZZ_CHECK(status.ok() == allowed,
               absl::StrCat("'", absl::CEscape(option), "': the allowlist says ",
                            status.ok() ? "allowed" : status.ToString(), ", its header says ",
                            allowed ? "allowed" : "refused"));
    FUZZ_CHECK(!status.ok() || !Dangerous(option), absl::CEscape(option));
    FUZZ_CHECK(status.ok() || status.code() == absl::StatusCode::kInvalidArgument,
               status.ToString());
    all_allowed = all_allowed && allowed;
  }
  FUZZ_CHECK(kcache::ValidateCompileOptions(options).ok() == all_allowed, "the whole list");
  return 0;
}
