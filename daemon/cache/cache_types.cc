// The artifact cache's plain data: tier names.
#include "daemon/cache/cache_types.h"

namespace kcache {

absl::string_view CacheTierName(CacheTier tier) {
  switch (tier) {
    case CacheTier::kMemory:
      return "memory";
    case CacheTier::kLocalStore:
      return "local_store";
    case CacheTier::kBakedStore:
      return "baked_store";
    case CacheTier::kCompile:
      return "compile";
    case CacheTier::kShared:
      return "shared";
  }
  return "unknown";
}

}  // namespace kcache
