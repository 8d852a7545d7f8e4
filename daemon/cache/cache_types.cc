// The artifact cache's plain data: tier names and the deferred-compile answer.
#include "daemon/cache/cache_types.h"

#include "absl/strings/cord.h"

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

constexpr char kCompileDeferredPayload[] = "kcache.dev/compile-deferred";

absl::Status CompileDeferredStatus() {
  absl::Status status =
      absl::UnavailableError("the kernel needs a compile, deferred by the caller");
  status.SetPayload(kCompileDeferredPayload, absl::Cord("1"));
  return status;
}

bool IsCompileDeferred(const absl::Status& status) {
  return status.GetPayload(kCompileDeferredPayload).has_value();
}

}  // namespace kcache
