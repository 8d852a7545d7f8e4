#include "client/cli/compiler_shims.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/launch/launch_command.h"
#include "core/sha256.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

absl::Status Failed(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot ", what, " ", path.string(), ": ", ec.message()));
}

// Makes `link` a symbolic link to `target`: made beside it under a temporary name and renamed
// over it (a directory in its place is removed first).
absl::Status PlaceLink(const fs::path& link, const fs::path& target) {
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(link, ec))) fs::remove_all(link, ec);
  fs::path tmp = absl::StrCat(link.string(), ".", getpid(), ".tmp");
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (!ec) fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Failed("link", link, ec);
  }
  return absl::OkStatus();
}

// Makes `dir` a directory (a link or file in its place is removed first).
absl::Status PlaceDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::file_status status = fs::symlink_status(dir, ec);
  if (fs::exists(status) && !fs::is_directory(status)) fs::remove(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return Failed("create", dir, ec);
  return absl::OkStatus();
}

// The names in `dir` (none when it cannot be read).
std::set<std::string> Names(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.insert(it->path().filename().string());
  }
  return names;
}

// Links each entry of `real` into `mirror` except `except` (whose names are left alone), and
// removes the mirror's entries that `real` no longer has. `real`'s entries are named through
// `real` itself (not resolved), as the build would have named them.
absl::Status Mirror(const fs::path& real, const fs::path& mirror,
                    const std::set<std::string>& except) {
  std::error_code ec;
  std::set<std::string> wanted;
  for (fs::directory_iterator it(real, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    wanted.insert(name);
    if (except.count(name)) continue;
    if (absl::Status placed = PlaceLink(mirror / name, real / name); !placed.ok()) return placed;
  }
  if (ec) return Failed("read", real, ec);
  for (const std::string& name : Names(mirror)) {
    if (!wanted.count(name) && !except.count(name) && !absl::EndsWith(name, ".tmp")) {
      fs::remove_all(mirror / name, ec);
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string Variable(const objects::Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

std::string FindProgram(const std::string& program, const objects::ToolLookup& lookup) {
  if (program.empty()) return "";
  auto executable = [](const std::string& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) return executable(program) ? program : "";
  for (absl::string_view dir :
       absl::StrSplit(Variable(lookup.env, "PATH"), ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (executable(candidate)) return candidate;
  }
  return "";
}

bool NamesKcache(const std::string& program, const objects::ToolLookup& lookup) {
  std::string file = FindProgram(program, lookup);
  std::error_code ec;
  fs::path real = fs::canonical(file, ec);
  return !file.empty() && !ec && lookup.IsKcache(real.string());
}

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && fs::equivalent(a, b, ec) && !ec;
}

std::string LauncherBinary() {
  std::string self = launch::SelfExe();
  fs::path launcher = fs::path(self).parent_path() / launch::kLaunchBinary;
  std::error_code ec;
  return fs::exists(launcher, ec) ? launcher.string() : self;
}

absl::Status MakeShims(const std::string& dir, const std::vector<std::string>& names,
                       const std::string& launcher) {
  if (absl::Status made = PlaceDirectory(dir); !made.ok()) return made;
  for (const std::string& name : names) {
    if (absl::Status placed = PlaceLink(fs::path(dir) / name, launcher); !placed.ok()) {
      return placed;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeShimToolkit(const std::string& shims, const std::string& real_root,
                                            const std::string& launcher) {
  fs::path root = fs::path(shims) / absl::StrCat("cuda-", Sha256Hex(real_root).substr(0, 12));
  fs::path real = real_root;
  if (absl::Status made = PlaceDirectory(root); !made.ok()) return made;
  if (absl::Status mirrored = Mirror(real, root, {"bin"}); !mirrored.ok()) return mirrored;
  if (absl::Status made = PlaceDirectory(root / "bin"); !made.ok()) return made;
  if (absl::Status mirrored = Mirror(real / "bin", root / "bin", {"nvcc"}); !mirrored.ok()) {
    return mirrored;
  }
  if (absl::Status placed = PlaceLink(root / "bin" / "nvcc", launcher); !placed.ok()) {
    return placed;
  }
  return root.string();
}

}  // namespace kcache::cli
