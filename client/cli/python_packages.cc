#include "client/cli/python_packages.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/run_process.h"

namespace kcache::cli {
namespace {

// Prints the distribution's files (RECORD, as importlib.metadata resolves them), one per line:
// "in\tPATH" for a file in the directory the distribution is installed in (links resolved),
// "out\tENTRY" for an entry that is absolute or leads out of it; exits 3 when it is not
// installed.
constexpr char kListFiles[] = R"(import importlib.metadata as m, os, sys
try:
    d = m.distribution(sys.argv[1])
except m.PackageNotFoundError:
    sys.exit(3)
root = os.path.realpath(d.locate_file(""))
for f in d.files or []:
    entry = str(f).replace("\n", " ").replace("\t", " ")
    if os.path.isabs(str(f)):
        print("out\t" + entry)
        continue
    p = os.path.realpath(d.locate_file(f))
    print(("in\t" + p) if os.path.commonpath([p, root]) == root else ("out\t" + entry))
)";

constexpr int kNotInstalled = 3;

}  // namespace

bool MayCarryCudaCode(absl::string_view path) {
  size_t slash = path.rfind('/');
  absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (absl::EndsWith(name, ".cubin") || absl::EndsWith(name, ".fatbin") ||
      absl::EndsWith(name, ".so")) {
    return true;
  }
  size_t so = name.find(".so.");
  if (so == absl::string_view::npos) return false;
  // .so.12 or .so.12.8.93: only digits and dots after it.
  for (char c : name.substr(so + 4)) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

absl::StatusOr<PackageFileList> PackageFiles(const std::string& python,
                                             const std::string& package) {
  absl::StatusOr<ProcessResult> ran =
      RunCaptured({"/usr/bin/env", python, "-c", kListFiles, package});
  if (!ran.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run ", python, " to find package '",
                                                      package, "': ", ran.status().message()));
  }
  if (ran->exit_code == kNotInstalled) {
    return absl::NotFoundError(absl::StrCat(
        "package '", package, "' is not installed for ", python,
        " (pip's name for it, e.g. nvidia-cublas-cu12; pass the environment's interpreter "
        "with --python)"));
  }
  if (ran->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(python, " failed (exit code ", ran->exit_code, ") listing package '", package,
                     "': ", absl::StripAsciiWhitespace(ran->stderr_text)));
  }
  PackageFileList list;
  for (absl::string_view line : absl::StrSplit(ran->stdout_text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "in\t")) {
      if (MayCarryCudaCode(line)) list.files.emplace_back(line);
    } else if (absl::ConsumePrefix(&line, "out\t")) {
      list.outside.emplace_back(line);
    }
  }
  return list;
}

}  // namespace kcache::cli
