// Synthetic artifacts and kernel records for store tests: random (incompressible) payloads,
// so values of 4 KiB and more land in blob files.
#ifndef KCACHE_TESTS_TESTUTIL_STORE_ARTIFACTS_H_
#define KCACHE_TESTS_TESTUTIL_STORE_ARTIFACTS_H_

#include <array>
#include <cstdint>
#include <string>

#include "core/artifact.h"
#include "core/kernel_spec.h"

namespace kcache::testing {

inline KernelId TestKernelId(uint8_t first) {
  std::array<uint8_t, KernelId::kSize> bytes;
  bytes.fill(0x5a);
  bytes[0] = first;
  return KernelId(bytes);
}

inline std::string TestPayload(size_t size, uint64_t seed) {
  std::string out(size, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (char& c : out) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  return out;
}

// A cubin for sm_86 of kernel TestKernelId(n) with `size` random bytes.
inline Artifact TestArtifact(uint8_t n, size_t size) {
  Artifact artifact;
  artifact.meta.key = ArtifactKey{TestKernelId(n), ArtifactKind::kCubin, *ParseTarget("sm_86"),
                                  "nvrtc-13.0+test", 0};
  artifact.meta.kernel_name = "kernel" + std::to_string(n);
  artifact.bytes = TestPayload(size, n);
  return artifact;
}

inline KernelRecord TestKernel(const std::string& source) {
  KernelRecord record;
  record.spec.name = "k_" + source;
  record.spec.source = source;
  record.id = ComputeKernelId(record.spec);
  return record;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_STORE_ARTIFACTS_H_
