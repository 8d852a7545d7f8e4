// Fuzzes the fatbin reader (engine/fatbin/library.h, fatbin.h): any bytes read as a library give
// entries or InvalidArgument / DataLoss naming the file; every entry's payload decompresses to
// exactly its declared size or is refused the same way; nothing is read past the input and no
// payload over the limit is allocated.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/library.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool Refusal(const absl::Status& status) {
  return (status.code() == absl::StatusCode::kInvalidArgument ||
          status.code() == absl::StatusCode::kDataLoss) &&
         absl::StartsWith(status.message(), "lib.so");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so that ASan catches a read one byte past the input.
  std::string bytes(reinterpret_cast<const char*>(data), size);
  kcache::fatbin::FatbinLimits limits;
  limits.max_payload_bytes = 1 << 20;
  absl::StatusOr<kcache::fatbin::Library> library =
      kcache::fatbin::Library::FromBytes(bytes, "lib.so", limits);
  if (!library.ok()) {
    FUZZ_CHECK(Refusal(library.status()), library.status().ToString());
    return 0;
  }
  for (const kcache::fatbin::FatbinEntry& entry : library->entries()) {
    FUZZ_CHECK(entry.stored.data() >= bytes.data() &&
                   entry.stored.data() + entry.stored.size() <= bytes.data() + bytes.size(),
               "an entry's payload lies outside the input");
    FUZZ_CHECK(entry.payload_size <= limits.max_payload_bytes,
               absl::StrCat("declared ", entry.payload_size));
    absl::StatusOr<std::string> payload = kcache::fatbin::EntryPayload(entry, "lib.so", limits);
    if (!payload.ok()) {
      FUZZ_CHECK(Refusal(payload.status()), payload.status().ToString());
      continue;
    }
    FUZZ_CHECK(entry.kind == kcache::fatbin::EntryKind::kPtx
                   ? payload->size() <= entry.payload_size
                   : payload->size() == entry.payload_size,
               absl::StrCat(payload->size(), " bytes, declared ", entry.payload_size));
    (void)entry.Describe();
  }
  return 0;
}
