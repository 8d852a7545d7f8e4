#include "engine/cache_dirs/cache_dir_table.h"

#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/cache_dirs/cache_dirs_yaml.h"

namespace kcache::cache_dirs {
namespace {

constexpr std::pair<KeyPart, absl::string_view> kKeyPartNames[] = {
    {KeyPart::kToolkit, "toolkit"}, {KeyPart::kTorch, "torch"},
    {KeyPart::kDriver, "driver"},   {KeyPart::kCommandLine, "command_line"},
    {KeyPart::kPath, "path"},
};

absl::Status RowError(size_t row, absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("cache directory table, row ", row + 1,
                                                 name.empty() ? "" : absl::StrCat(" (", name, ")"),
                                                 ": ", what));
}

// A scalar field ("" when absent); false when it is there and not a scalar.
bool Text(const YAML::Node& row, const char* field, std::string* out) {
  const YAML::Node node = row[field];
  if (!node.IsDefined() || node.IsNull()) return true;
  if (!node.IsScalar()) return false;
  *out = node.as<std::string>();
  return true;
}

// A list of scalars (empty when absent); false when it is there and not one.
bool Texts(const YAML::Node& row, const char* field, std::vector<std::string>* out) {
  const YAML::Node node = row[field];
  if (!node.IsDefined() || node.IsNull()) return true;
  if (!node.IsSequence()) return false;
  for (const YAML::Node& item : node) {
    if (!item.IsScalar()) return false;
    out->push_back(item.as<std::string>());
  }
  return true;
}

bool IsVariableChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

bool ValidName(absl::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_';
  });
}

// Expands text[*at..] up to `stop` (a '}' closing a fallback) or its end.
absl::StatusOr<std::string> ExpandUntil(absl::string_view text, size_t* at, bool in_fallback,
                                        const Environment& env) {
  std::string out;
  // A ~ leading the text or a fallback, alone or before '/', is $HOME.
  if (*at < text.size() && text[*at] == '~' &&
      (*at + 1 == text.size() || text[*at + 1] == '/' || (in_fallback && text[*at + 1] == '}'))) {
    auto home = env.find("HOME");
    if (home == env.end() || home->second.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("$HOME is not set, and ", text, " needs it"));
    }
    out = home->second;
    ++*at;
  }
  while (*at < text.size()) {
    char c = text[*at];
    if (in_fallback && c == '}') return out;
    if (c != '$') {
      out.push_back(c);
      ++*at;
      continue;
    }
    ++*at;
    bool braced = *at < text.size() && text[*at] == '{';
    if (braced) ++*at;
    size_t start = *at;
    while (*at < text.size() && IsVariableChar(text[*at])) ++*at;
    std::string name(text.substr(start, *at - start));
    if (name.empty())
      return absl::InvalidArgumentError(absl::StrCat("'$' without a name in ", text));
    auto found = env.find(name);
    std::string value = found != env.end() ? found->second : "";
    if (braced) {
      std::string fallback;
      bool has_fallback = absl::StartsWith(text.substr(*at), ":-");
      if (has_fallback) {
        *at += 2;
        absl::StatusOr<std::string> inner = ExpandUntil(text, at, /*in_fallback=*/true, env);
        if (!inner.ok()) return inner.status();
        fallback = *std::move(inner);
      }
      if (*at >= text.size() || text[*at] != '}') {
        return absl::InvalidArgumentError(absl::StrCat("unterminated ${ in ", text));
      }
      ++*at;
      if (value.empty() && has_fallback) value = fallback;
    }
    if (value.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("$", name, " is not set, and ", text, " needs it"));
    }
    out += value;
  }
  if (in_fallback) return absl::InvalidArgumentError(absl::StrCat("unterminated ${ in ", text));
  return out;
}

}  // namespace

bool CacheDirSpec::Keys(KeyPart part) const {
  return std::find(keys.begin(), keys.end(), part) != keys.end();
}

absl::string_view KeyPartName(KeyPart part) {
  for (const auto& [p, name] : kKeyPartNames) {
    if (p == part) return name;
  }
  return "unknown";
}

absl::StatusOr<std::vector<CacheDirSpec>> ParseCacheDirTable(absl::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cache directory table: ", e.what()));
  }
  if (!root.IsSequence()) {
    return absl::InvalidArgumentError("cache directory table: not a list of rows");
  }
  std::vector<CacheDirSpec> table;
  for (size_t i = 0; i < root.size(); ++i) {
    const YAML::Node row = root[i];
    if (!row.IsMap()) return RowError(i, "", "not a map of fields");
    CacheDirSpec spec;
    std::vector<std::string> keys;
    std::string at_exit;
    if (!Text(row, "name", &spec.name) || !ValidName(spec.name)) {
      return RowError(i, spec.name, "name must be [a-z0-9_-]+");
    }
    for (const CacheDirSpec& earlier : table) {
      if (earlier.name == spec.name) return RowError(i, spec.name, "named twice");
    }
    if (!Texts(row, "distributions", &spec.distributions) ||
        !Texts(row, "variables", &spec.variables) || !Texts(row, "prefixes", &spec.prefixes) ||
        !Texts(row, "keys", &keys) || !Texts(row, "leave_out", &spec.leave_out) ||
        !Texts(row, "in_place", &spec.in_place)) {
      return RowError(i, spec.name,
                      "distributions, variables, prefixes, keys, leave_out and in_place are lists");
    }
    if (!Text(row, "default", &spec.default_path) || spec.default_path.empty()) {
      return RowError(i, spec.name, "default (the directory when no variable is set) is missing");
    }
    if (!Text(row, "subdirectory", &spec.subdirectory) || !Text(row, "misses", &spec.misses) ||
        !Text(row, "served_by", &spec.served_by) || !Text(row, "at_exit", &at_exit)) {
      return RowError(i, spec.name,
                      "default, subdirectory, misses, served_by and at_exit are text");
    }
    if (at_exit != "" && at_exit != "true" && at_exit != "false") {
      return RowError(i, spec.name, "at_exit is true or false");
    }
    spec.at_exit = at_exit == "true";
    for (const std::string& key : keys) {
      auto part = std::find_if(std::begin(kKeyPartNames), std::end(kKeyPartNames),
                               [&](const auto& entry) { return entry.second == key; });
      if (part == std::end(kKeyPartNames)) {
        return RowError(i, spec.name,
                        absl::StrCat("keys: no key part '", key,
                                     "' (toolkit, torch, driver, command_line, path)"));
      }
      spec.keys.push_back(part->first);
    }
    table.push_back(std::move(spec));
  }
  return table;
}

const std::vector<CacheDirSpec>& KnownCacheDirs() {
  static const std::vector<CacheDirSpec>* table = [] {
    absl::StatusOr<std::vector<CacheDirSpec>> parsed = ParseCacheDirTable(kCacheDirsYaml);
    return new std::vector<CacheDirSpec>(parsed.ok() ? *std::move(parsed)
                                                     : std::vector<CacheDirSpec>{});
  }();
  return *table;
}

const CacheDirSpec* FindKnownCacheDir(absl::string_view name) {
  for (const CacheDirSpec& spec : KnownCacheDirs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

absl::StatusOr<CacheDirSpec> ParseUserCacheDir(absl::string_view flag) {
  std::pair<absl::string_view, absl::string_view> name_dir =
      absl::StrSplit(flag, absl::MaxSplits('=', 1));
  CacheDirSpec spec;
  spec.name = std::string(name_dir.first);
  if (!ValidName(spec.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cache-dir ", flag,
                     ": the name must be [a-z0-9_-]+ (--cache-dir NAME=DIR[:PREFIX,...])"));
  }
  if (FindKnownCacheDir(spec.name) != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cache-dir ", flag, ": ", spec.name,
                     " is a directory kcache knows already (kcache cache-dirs lists them); name "
                     "yours otherwise"));
  }
  std::pair<absl::string_view, absl::string_view> dir_prefixes =
      absl::StrSplit(name_dir.second, absl::MaxSplits(':', 1));
  if (!absl::StartsWith(dir_prefixes.first, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cache-dir ", flag, ": DIR must be an absolute path"));
  }
  spec.default_path = std::string(dir_prefixes.first);
  for (absl::string_view prefix : absl::StrSplit(dir_prefixes.second, ',', absl::SkipEmpty())) {
    spec.prefixes.emplace_back(prefix);
  }
  spec.keys = {KeyPart::kToolkit, KeyPart::kTorch, KeyPart::kPath};
  spec.misses = "not known: a user's directory";
  spec.leave_out = {"*.lock", "*.tmp"};
  spec.user_added = true;
  return spec;
}

absl::StatusOr<std::string> ExpandPath(absl::string_view text, const Environment& env) {
  size_t at = 0;
  return ExpandUntil(text, &at, /*in_fallback=*/false, env);
}

absl::StatusOr<std::string> ResolveCacheDir(const CacheDirSpec& spec, const Environment& env) {
  std::string base;
  for (const std::string& variable : spec.variables) {
    auto found = env.find(variable);
    if (found != env.end() && !found->second.empty()) {
      base = found->second;
      break;
    }
  }
  if (base.empty()) {
    absl::StatusOr<std::string> expanded = ExpandPath(spec.default_path, env);
    if (!expanded.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          spec.name, "'s cache directory: ", expanded.status().message(),
          spec.variables.empty() ? "" : absl::StrCat(" (or set ", spec.variables[0], ")")));
    }
    base = *std::move(expanded);
  } else if (absl::StartsWith(base, "~")) {
    absl::StatusOr<std::string> expanded = ExpandPath(base, env);
    if (!expanded.ok()) return expanded.status();
    base = *std::move(expanded);
  }
  std::filesystem::path dir(base);
  if (!spec.subdirectory.empty()) dir /= spec.subdirectory;
  if (!dir.is_absolute()) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec.name, "'s cache directory ", dir.string(), " is not an absolute path"));
  }
  std::string normal = dir.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

bool LeftOut(const CacheDirSpec& spec, absl::string_view relative) {
  std::string path(relative);
  for (const std::string& glob : spec.leave_out) {
    if (fnmatch(glob.c_str(), path.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace kcache::cache_dirs
