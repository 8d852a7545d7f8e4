#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/store/store.h"

namespace kcache {

absl::StatusOr<KernelRecord> FindKernel(Store& store, absl::string_view name_or_id) {
  std::string wanted = absl::AsciiStrToLower(name_or_id);
  if (wanted.size() == 2 * KernelId::kSize) {
    absl::StatusOr<KernelId> id = KernelId::FromHex(wanted);
    if (id.ok()) {
      absl::StatusOr<KernelRecord> record = store.GetKernel(*id);
      if (record.ok() || !absl::IsNotFound(record.status())) return record;
    }
  }
  absl::StatusOr<std::vector<KernelRecord>> records = store.ListKernels();
  if (!records.ok()) return records.status();
  const KernelRecord* best = nullptr;
  int prefix_matches = 0;
  const KernelRecord* by_prefix = nullptr;
  for (const KernelRecord& r : *records) {
    if (r.spec.name == name_or_id) {
      if (best == nullptr || r.registered_unix_ms > best->registered_unix_ms) best = &r;
    } else if (wanted.size() >= 8 && absl::StartsWith(r.id.Hex(), wanted)) {
      ++prefix_matches;
      by_prefix = &r;
    }
  }
  if (best != nullptr) return *best;
  if (prefix_matches == 1) return *by_prefix;
  if (prefix_matches > 1) {
    return absl::InvalidArgumentError(absl::StrCat("kernel id prefix '", name_or_id, "' matches ",
                                                   prefix_matches,
                                                   " kernels; give more digits (see `kcache ls`)"));
  }
  return absl::NotFoundError(absl::StrCat("no kernel named or with id '", name_or_id,
                                          "' in the store; `kcache ls` lists what it holds"));
}

}  // namespace kcache
