// The ObjectCache interface's defaults and the bound on a bundle's size.
#include "engine/objects/object_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kcache::objects {

absl::StatusOr<HeldBytes> ObjectCache::GetHeld(const ObjectEntryKey& key) {
  absl::StatusOr<std::string> bytes = Get(key);
  if (!bytes.ok()) return bytes.status();
  auto owned = std::make_shared<const std::string>(*std::move(bytes));
  return HeldBytes{*owned, owned};
}

absl::Status CheckObjectBytes(uint64_t bytes, uint64_t max_bytes) {
  if (bytes <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("an object of ", bytes, " bytes is over --object-max-bytes ", max_bytes));
}

}  // namespace kcache::objects
