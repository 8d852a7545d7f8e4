// Copying kcached's client-made objects into a store directory.
#include "engine/objects/object_export.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/objects/named_object.h"
#include "engine/objects/object_bundle.h"
#include "engine/objects/object_schema.h"

namespace kcache::objects {
namespace {

// The value's name when `entry` is a named value's (its listed name is that name's key).
bool NamedValueName(const ObjectEntry& entry, std::string* name) {
  return absl::CUnescape(entry.source, name) && NamedValueKey(*name) == entry.key;
}

// Whether `bundle` is what `entry` says it is.
bool Verifies(const ObjectEntry& entry, const std::string& bundle) {
  absl::StatusOr<ObjectBundle> decoded = DecodeBundle(bundle);
  if (!decoded.ok()) return false;
  std::string name;
  if (NamedValueName(entry, &name)) {
    return decoded->deps.targets.size() == 1 && decoded->deps.targets[0] == name;
  }
  return ManifestId(entry.manifest) == entry.key.entry_id;
}

}  // namespace

std::string NamespaceOf(const ObjectEntry& entry) {
  std::string name;
  if (!NamedValueName(entry, &name)) return kLauncherNamespace;
  return name.substr(0, name.find(':'));
}

absl::StatusOr<ExportProgress> ExportObjects(
    ObjectCache& from, Store& to, const ExportOptions& options,
    const std::function<void(const ExportProgress&)>& progress) {
  ExportProgress done;
  std::string after;
  do {
    absl::StatusOr<ObjectPage> page = from.ListClientMade(after);
    if (!page.ok()) return page.status();
    if (!page->next_after.empty() && page->next_after <= after) {
      return absl::DataLossError("the object listing went backwards; export stopped");
    }
    after = page->next_after;
    for (const ObjectEntry& entry : page->entries) {
      ++done.listed;
      std::string ns = NamespaceOf(entry);
      const auto& wanted = options.namespaces;
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), ns) == wanted.end()) {
        ++done.other_namespace;
      } else if (absl::StatusOr<std::string> bundle = from.Get(entry.key); !bundle.ok()) {
        ++done.gone;
      } else if (!Verifies(entry, *bundle)) {
        ++done.refused;
      } else {
        if (absl::Status put = to.Put(ArtifactFromObjectEntry(entry, *bundle)); !put.ok())
          return put;
        ++done.exported;
        done.bytes += bundle->size();
        ++done.by_namespace[ns];
      }
      if (progress) progress(done);
    }
  } while (!after.empty());
  return done;
}

}  // namespace kcache::objects
