// Named objects: a client's name and value as an object entry, and back.
#include "engine/objects/named_object.h"

#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/objects/object_bundle.h"

namespace kcache::objects {

absl::Status PutNamedObject(ObjectCache& cache, absl::string_view name, std::string value,
                            std::string put_by) {
  ObjectBundle bundle;
  bundle.object = std::move(value);
  bundle.deps.targets.emplace_back(name);
  std::string bytes = EncodeBundle(bundle);
  ObjectEntry entry;
  entry.key = NamedValueKey(name);
  entry.source = absl::CHexEscape(name);
  entry.fields.emplace_back("name", entry.source);
  entry.size = bytes.size();
  entry.put_by = std::move(put_by);
  return cache.Put(entry, bytes);
}

absl::StatusOr<std::string> GetNamedObject(ObjectCache& cache, absl::string_view name) {
  absl::StatusOr<std::string> bytes = cache.Get(NamedValueKey(name));
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<ObjectBundle> bundle = DecodeBundle(*bytes);
  if (!bundle.ok() || bundle->deps.targets.size() != 1 || bundle->deps.targets[0] != name) {
    return absl::NotFoundError(
        absl::StrCat("the entry of ", absl::CHexEscape(name), " holds another name's value"));
  }
  return std::move(bundle->object);
}

bool HoldsNamedObject(ObjectCache& cache, absl::string_view name) {
  absl::StatusOr<std::vector<ObjectEntry>> listed = cache.List(NamedValueKey(name).command);
  return listed.ok() && !listed->empty();
}

absl::Status DeleteNamedObject(ObjectCache& cache, absl::string_view name) {
  return cache.Delete(NamedValueKey(name));
}

}  // namespace kcache::objects
