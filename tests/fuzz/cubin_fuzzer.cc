// Fuzzes the cubin ELF reader (core/cubin.h): any bytes give an SM of 10..255 or
// InvalidArgument with a reason, entry point names or InvalidArgument, and a toolkit (major 1 or
// more, minor 0..9) or InvalidArgument, never a read past the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/cubin.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so that ASan catches a read one byte past the input.
  std::string elf(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<int> sm = kcache::CubinSmArch(elf);
  if (sm.ok()) {
    FUZZ_CHECK(*sm >= 10 && *sm <= 255, absl::StrCat("SM ", *sm));
  } else {
    FUZZ_CHECK(sm.status().code() == absl::StatusCode::kInvalidArgument, sm.status().ToString());
    FUZZ_CHECK(absl::StartsWith(sm.status().message(), "not a CUDA cubin: "),
               sm.status().ToString());
  }
  absl::StatusOr<std::vector<std::string>> entries = kcache::CubinEntryNames(elf);
  if (entries.ok()) {
    FUZZ_CHECK(sm.ok(), "entry points read from bytes that are not a cubin");
    for (const std::string& name : *entries) {
      FUZZ_CHECK(!name.empty() && name.size() < size, absl::StrCat("entry '", name, "'"));
    }
  } else {
    FUZZ_CHECK(entries.status().code() == absl::StatusCode::kInvalidArgument,
               entries.status().ToString());
  }
  absl::StatusOr<kcache::CubinToolkitVersion> toolkit = kcache::CubinToolkit(elf);
  if (toolkit.ok()) {
    FUZZ_CHECK(kcache::IsCudaElf(elf), "a toolkit read from bytes that are not a CUDA ELF file");
    FUZZ_CHECK(toolkit->major >= 1 && toolkit->minor >= 0 && toolkit->minor <= 9,
               absl::StrCat("toolkit ", toolkit->major, ".", toolkit->minor));
  } else {
    FUZZ_CHECK(toolkit.status().code() == absl::StatusCode::kInvalidArgument,
               toolkit.status().ToString());
  }
  return 0;
}
