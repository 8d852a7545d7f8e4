#include "engine/cache_dirs/installed_versions.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace kcache::cache_dirs {
namespace {

namespace fs = std::filesystem;

bool IsDirectory(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// The python3 (else python) first on PATH, "" when none.
fs::path PythonOnPath(const Environment& env) {
  auto path = env.find("PATH");
  if (path == env.end()) return {};
  for (const char* name : {"python3", "python"}) {
    for (absl::string_view dir : absl::StrSplit(path->second, ':', absl::SkipEmpty())) {
      fs::path candidate = fs::path(std::string(dir)) / name;
      std::error_code ec;
      if (fs::exists(candidate, ec) && !IsDirectory(candidate)) return candidate;
    }
  }
  return {};
}

}  // namespace

std::string NormalizedDistribution(absl::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      in_run = true;
      continue;
    }
    if (in_run && !out.empty()) out.push_back('-');
    in_run = false;
    out.push_back(absl::ascii_tolower(c));
  }
  return out;
}

std::vector<std::string> SiteDirectories(const Environment& env) {
  std::vector<std::string> dirs;
  auto add = [&](const fs::path& dir) {
    std::string text = dir.lexically_normal().string();
    if (IsDirectory(dir) && std::find(dirs.begin(), dirs.end(), text) == dirs.end()) {
      dirs.push_back(text);
    }
  };
  if (auto pythonpath = env.find("PYTHONPATH"); pythonpath != env.end()) {
    for (absl::string_view dir : absl::StrSplit(pythonpath->second, ':', absl::SkipEmpty())) {
      add(fs::path(std::string(dir)));
    }
  }
  fs::path python = PythonOnPath(env);
  if (python.empty()) return dirs;
  fs::path prefix = python.parent_path().parent_path();  // not resolved: a venv's bin/python3
  std::vector<fs::path> versioned;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(prefix / "lib", ec)) {
    if (absl::StartsWith(entry.path().filename().string(), "python3.")) {
      versioned.push_back(entry.path());
    }
  }
  std::sort(versioned.begin(), versioned.end());
  for (const fs::path& lib : versioned) add(lib / "site-packages");
  for (const fs::path& lib : versioned) add(lib / "dist-packages");
  add(prefix / "lib/python3/dist-packages");
  return dirs;
}

std::map<std::string, std::string> InstalledVersions(const std::vector<std::string>& site_dirs) {
  std::map<std::string, std::string> versions;
  for (const std::string& dir : site_dirs) {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
      std::string file = entry.path().filename().string();
      absl::string_view name = file;
      if (!absl::ConsumeSuffix(&name, ".dist-info")) continue;
      // <name>-<version>: the name has no '-' in a wheel's folder, the version none either.
      size_t dash = name.rfind('-');
      if (dash == absl::string_view::npos || dash == 0 || dash + 1 == name.size()) continue;
      versions.emplace(NormalizedDistribution(name.substr(0, dash)),
                       std::string(name.substr(dash + 1)));
    }
  }
  return versions;
}

}  // namespace kcache::cache_dirs
