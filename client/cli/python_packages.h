// The files an installed Python package (a distribution, as pip names it) holds that may carry
// CUDA code: what `kcache warm --package NAME` reads as libraries (docs/ptx-libraries.md).
#ifndef KCACHE_CLIENT_CLI_PYTHON_PACKAGES_H_
#define KCACHE_CLIENT_CLI_PYTHON_PACKAGES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache::cli {

// Whether a file's name is one that may carry CUDA code: a shared object (`.so`, `.so.12`,
// `.so.12.8.93`), a cubin or a fatbin.
bool MayCarryCudaCode(absl::string_view path);

struct PackageFileList {
  // Those that MayCarryCudaCode, as absolute paths (links resolved), in RECORD's order.
  std::vector<std::string> files;
  // RECORD's entries that are absolute or lead (by `..` or a link) out of the directory the
  // distribution is installed in (site-packages): not read, as a package installs nothing
  // there that carries CUDA code, and RECORD is the package's own text.
  std::vector<std::string> outside;
};

// The files of distribution `package` installed for the Python interpreter `python` (a path, or
// a name found on PATH). Asks the interpreter itself (importlib.metadata), so the environment
// it runs in (a venv, PYTHONPATH) decides. NotFound when the package is not installed there;
// FailedPrecondition when the interpreter cannot be run or fails, saying what it printed.
absl::StatusOr<PackageFileList> PackageFiles(const std::string& python, const std::string& package);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_PYTHON_PACKAGES_H_
