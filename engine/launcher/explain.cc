// `kcache explain`: whether a command would hit, and if not, the first part of its key that
// differs from the nearest recorded entry for the same source.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/keys/header_manifest.h"
#include "engine/launcher/launcher.h"
#include "engine/launcher/prepared_command.h"

namespace kcache::objects {
namespace {

// The first field that tells `now` from `recorded`: "tag: recorded 'a', now 'b'".
std::string FirstDifference(const std::vector<KeyField>& now,
                            const std::vector<KeyField>& recorded) {
  auto missing_from = [](const std::vector<KeyField>& fields, const KeyField& field) {
    return std::find(fields.begin(), fields.end(), field) == fields.end();
  };
  for (const KeyField& field : now) {
    if (!missing_from(recorded, field)) continue;
    std::string was = "(absent)";
    for (const KeyField& old : recorded) {
      if (old.first == field.first && missing_from(now, old)) {
        was = old.second;
        break;
      }
    }
    return absl::StrCat(field.first, " differs: recorded '", was, "', now '", field.second, "'");
  }
  for (const KeyField& old : recorded) {
    if (missing_from(now, old)) {
      return absl::StrCat(old.first, " differs: recorded '", old.second, "', now (absent)");
    }
  }
  return "the key fields match but the key differs (recorded by another kcache version)";
}

size_t CountDifferences(const std::vector<KeyField>& a, const std::vector<KeyField>& b) {
  size_t count = 0;
  for (const KeyField& field : a) count += std::find(b.begin(), b.end(), field) == b.end();
  for (const KeyField& field : b) count += std::find(a.begin(), a.end(), field) == a.end();
  return count;
}

}  // namespace

std::string ExplainCompile(const LauncherOptions& options, CompilerFamily family,
                           const std::string& compiler, const std::vector<std::string>& args) {
  absl::StatusOr<std::string> compiler_path = RealCompiler(options, family, compiler);
  if (!compiler_path.ok()) return absl::StrCat("error: ", compiler_path.status().message());
  FileDigests digests(options.digest_table);
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<Prepared> prepared =
      Prepare(options, family, *compiler_path, args, digests, &reason);
  if (!prepared.ok()) {
    return absl::StrCat("uncached (", UncachedReasonName(reason),
                        "): ", prepared.status().message());
  }
  absl::StatusOr<std::unique_ptr<ObjectCache>> cache = options.open_cache();
  if (!cache.ok()) return absl::StrCat("error: ", cache.status().message());
  absl::StatusOr<std::vector<ObjectEntry>> entries = (*cache)->List(prepared->key.key1);
  if (!entries.ok()) return absl::StrCat("error: ", entries.status().message());
  std::string first_difference;
  for (const ObjectEntry& entry : *entries) {
    std::string difference;
    if (ManifestMatches(entry.manifest, prepared->dirs, options.lookup.env, digests, &difference)) {
      return absl::StrCat("hit: entry ", entry.key.ToString());
    }
    if (first_difference.empty()) first_difference = difference;
  }
  if (!entries->empty()) {
    return absl::StrCat("miss: the command matches ", entries->size(), " recorded entr",
                        entries->size() == 1 ? "y" : "ies", " but ", first_difference);
  }
  absl::StatusOr<std::vector<ObjectEntry>> all = (*cache)->ListAll();
  if (!all.ok()) return absl::StrCat("error: ", all.status().message());
  const ObjectEntry* nearest = nullptr;
  size_t nearest_count = 0;
  for (const ObjectEntry& entry : *all) {
    if (entry.source != prepared->key.source) continue;
    size_t count = CountDifferences(prepared->key.fields, entry.fields);
    if (nearest == nullptr || count < nearest_count) {
      nearest = &entry;
      nearest_count = count;
    }
  }
  if (nearest == nullptr) {
    return absl::StrCat("miss: nothing recorded for source ", prepared->key.source, " (",
                        all->size(), " entries in the cache)");
  }
  return absl::StrCat("miss: ", FirstDifference(prepared->key.fields, nearest->fields));
}

}  // namespace kcache::objects
