// Paging object entries in the order of their store keys.
#include "engine/objects/object_page.h"

#include <algorithm>
#include <utility>

#include "engine/objects/object_schema.h"

namespace kcache::objects {

ObjectPage PageOfEntries(std::vector<ObjectEntry> entries, const std::string& after,
                         size_t max_bytes) {
  std::vector<std::pair<std::string, ObjectEntry*>> sorted;
  for (ObjectEntry& entry : entries) {
    std::string key = ObjectStoreKey(entry.key).Encode();
    if (key > after) sorted.emplace_back(std::move(key), &entry);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  ObjectPage page;
  size_t bytes = 0;
  for (auto& [key, entry] : sorted) {
    if (!page.entries.empty() && bytes >= max_bytes) {
      page.next_after = ObjectStoreKey(page.entries.back().key).Encode();
      break;
    }
    bytes += entry->source.size();
    for (const auto& [name, value] : entry->manifest) bytes += name.size() + value.size();
    for (const auto& [name, value] : entry->fields) bytes += name.size() + value.size();
    page.entries.push_back(std::move(*entry));
  }
  return page;
}

}  // namespace kcache::objects
