// Named objects: a client's name and value as an object entry, and back.
#include "engine/objects/named_object.h"

#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/sha256.h"

namespace kcache::objects {
namespace {

constexpr char kNamedObjectDomain[] = "kcache.named-object";

KernelId NameKey1(absl::string_view name) {
  std::string framing = kNamedObjectDomain;
  framing.push_back('\0');
  absl::StrAppend(&framing, name);
  return KernelId(Sha256Of(framing));
}

}  // namespace

ArtifactKey NamedObjectKey(absl::string_view name) {
  return ObjectArtifactKey(NameKey1(name), Manifest{});
}

absl::Status PutNamedObject(ObjectCache& cache, absl::string_view name, std::string value) {
  ObjectBundle bundle;
  bundle.object = std::move(value);
  bundle.deps.targets.emplace_back(name);
  std::string bytes = EncodeBundle(bundle);
  ObjectEntryMeta entry;
  entry.key = NamedObjectKey(name);
  entry.source = absl::CHexEscape(name);
  entry.fields.emplace_back("name", entry.source);
  entry.size = bytes.size();
  return cache.Put(entry, bytes);
}

absl::StatusOr<std::string> GetNamedObject(ObjectCache& cache, absl::string_view name) {
  absl::StatusOr<std::string> bytes = cache.Get(NamedObjectKey(name));
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<ObjectBundle> bundle = DecodeBundle(*bytes);
  if (!bundle.ok() || bundle->deps.targets.size() != 1 || bundle->deps.targets[0] != name) {
    return absl::NotFoundError(
        absl::StrCat("the entry of ", absl::CHexEscape(name), " holds another name's value"));
  }
  return std::move(bundle->object);
}

bool HoldsNamedObject(ObjectCache& cache, absl::string_view name) {
  absl::StatusOr<std::vector<ObjectEntryMeta>> listed = cache.List(NamedObjectKey(name).kernel_id);
  return listed.ok() && !listed->empty();
}

absl::Status DeleteNamedObject(ObjectCache& cache, absl::string_view name) {
  return cache.Delete(NamedObjectKey(name));
}

}  // namespace kcache::objects
