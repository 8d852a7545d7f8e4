// Header manifests: made from a compile's reads, checked against this machine's files.
#include "engine/keys/header_manifest.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kcache::objects {
namespace {

// Whether a file whose later of mtime and ctime is `changed` may have changed after the
// compiler started at `compiled_from`.
bool ChangedDuringCompile(absl::Time changed, absl::Time compiled_from) {
  bool whole_seconds = absl::ToUnixNanos(changed) % 1000000000 == 0;
  return changed >= compiled_from - (whole_seconds ? absl::Seconds(1) : absl::ZeroDuration());
}

}  // namespace

namespace {

// One manifest line per path, in order; `text_rules`: the time-macro rule applies.
absl::StatusOr<HeaderManifest> ManifestOf(const std::vector<std::string>& paths,
                                          const BaseDirs& dirs, FileDigests& digests,
                                          UncachedReason* reason, absl::Time compiled_from,
                                          bool text_rules, DigestKind kind) {
  HeaderManifest manifest;
  digests.BeginPass();
  for (const std::string& dep : paths) {
    std::string normalized = dirs.Normalize(dep);
    absl::StatusOr<FileDigest> digest = digests.Digest(dirs.Resolve(normalized), kind);
    if (!digest.ok()) {
      *reason = UncachedReason::kUnreadableInput;
      return absl::FailedPreconditionError(digest.status().message());
    }
    if (text_rules && digest->has_time_macro) {
      *reason = UncachedReason::kTimeMacros;
      return absl::FailedPreconditionError(absl::StrCat(dep, " names a time macro"));
    }
    if (ChangedDuringCompile(digest->changed, compiled_from)) {
      *reason = UncachedReason::kInputChanged;
      return absl::FailedPreconditionError(absl::StrCat(dep, " changed while it compiled"));
    }
    manifest.emplace_back(std::move(normalized), digest->hex);
  }
  return manifest;
}

}  // namespace

absl::StatusOr<HeaderManifest> MakeManifest(const DepFile& deps, const BaseDirs& dirs,
                                            FileDigests& digests, UncachedReason* reason,
                                            absl::Time compiled_from) {
  return ManifestOf(deps.deps, dirs, digests, reason, compiled_from, /*text_rules=*/true,
                    DigestKind::kContent);
}

absl::StatusOr<HeaderManifest> MakeInputManifest(const std::vector<std::string>& paths,
                                                 const BaseDirs& dirs, FileDigests& digests,
                                                 UncachedReason* reason, absl::Time compiled_from,
                                                 DigestKind kind) {
  return ManifestOf(paths, dirs, digests, reason, compiled_from, /*text_rules=*/false, kind);
}

std::string EnvironmentFact(const std::string& name, const Environment& env, const BaseDirs& dirs) {
  auto it = env.find(name);
  if (it == env.end()) return "(unset)";
  if (name == "PWD") {
    // gcc (getpwd) and others use $PWD for the working directory only when it names it.
    struct stat pwd {
    }, cwd{};
    if (it->second.empty() || it->second[0] != '/' || stat(it->second.c_str(), &pwd) != 0 ||
        stat(dirs.cwd.c_str(), &cwd) != 0 || pwd.st_dev != cwd.st_dev || pwd.st_ino != cwd.st_ino) {
      return "(not the working directory)";
    }
  }
  return absl::StrCat("=", dirs.Normalize(it->second));
}

namespace {

// What a manifest line says of its path, for a message.
std::string Difference(const std::pair<std::string, std::string>& line, const std::string& path,
                       FileDigests& digests) {
  absl::string_view value = line.second;
  if (value == kAbsentFact) return absl::StrCat(path, " exists now");
  for (absl::string_view prefix : {kExistsPrefix, kLexistsPrefix, kFailedPrefix, kReadlinkPrefix,
                                   kRealpathPrefix, kListingPrefix}) {
    if (absl::StartsWith(value, prefix)) {
      return absl::StrCat(path, " is not what it was (recorded ", value, ")");
    }
  }
  absl::ConsumePrefix(&value, kResolvesToItselfMark);
  bool linked = absl::StartsWith(value, kLinkInputPrefix);
  bool tool = absl::StartsWith(value, kToolPrefix);
  // Digested as recorded: a library's whole bytes would be read for one word.
  absl::StatusOr<FileDigest> digest = digests.Digest(
      path, linked ? DigestKind::kLinkInput : (tool ? DigestKind::kTool : DigestKind::kContent));
  return absl::StrCat(linked ? "linker input " : (tool ? "program " : "header "), path,
                      digest.ok() ? " changed" : " is missing");
}

}  // namespace

bool ManifestMatches(const HeaderManifest& manifest, const BaseDirs& dirs, const Environment& env,
                     FileDigests& digests, std::string* first_difference) {
  for (const auto& [path, recorded] : manifest) {
    if (path.empty() || path[0] != '$') continue;
    std::string name = path.substr(1);
    std::string now = EnvironmentFact(name, env, dirs);
    if (now == recorded) continue;
    if (first_difference != nullptr) {
      *first_difference = absl::StrCat("environment ", name, " differs: recorded '", recorded,
                                       "', now '", now, "'");
    }
    return false;
  }
  digests.BeginPass();
  std::vector<FileDigests::Expected> files;
  std::vector<size_t> lines;          // files[i] is manifest[lines[i]]
  std::vector<std::string> restored;  // a link target or realpath answer, with this machine's dirs
  restored.reserve(manifest.size());
  files.reserve(manifest.size());
  for (size_t i = 0; i < manifest.size(); ++i) {
    const auto& [path, recorded] = manifest[i];
    if (!path.empty() && path[0] == '$') continue;
    absl::string_view value = recorded;
    for (absl::string_view prefix : {kReadlinkPrefix, kRealpathPrefix}) {
      if (absl::StartsWith(value, prefix)) {
        restored.push_back(
            absl::StrCat(prefix, dirs.Restore(std::string(value.substr(prefix.size())))));
        value = restored.back();
      }
    }
    files.push_back({dirs.Resolve(path), value});
    lines.push_back(i);
  }
  size_t bad = digests.FirstMismatch(files);
  if (bad == files.size()) return true;
  if (first_difference != nullptr) {
    *first_difference = Difference(manifest[lines[bad]], files[bad].path, digests);
  }
  return false;
}

}  // namespace kcache::objects
