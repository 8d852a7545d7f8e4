// Small real kernels for tests that compile (each compiles in well under 0.2 s per target).
#ifndef KCACHE_TESTS_TESTUTIL_KERNELS_H_
#define KCACHE_TESTS_TESTUTIL_KERNELS_H_

#include "tests/testutil/temp_dir.h"

namespace kcache::testing {

inline constexpr char kSaxpySource[] = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

inline constexpr char kScaleTemplateSource[] = R"(
#include "scale.cuh"
template <typename T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * factor + T(kBias);
}
)";
inline constexpr char kScaleHeader[] = "#pragma once\nconstexpr int kBias = 1;\n";

// A compile that takes about a second of CPU (40 unrolled transcendental steps).
inline constexpr char kSlowSource[] = R"(
#define B a = sinf(a) * 1.0001f + cosf(a * 1.1f);
#define R10(x) x x x x x x x x x x
extern "C" __global__ void slow(float* y, const float* x) {
  float a = x[threadIdx.x];
  R10(B B B B)
  y[threadIdx.x] = a;
}
)";

inline constexpr char kSyntaxErrorSource[] = R"(
extern "C" __global__ void broken(float* y) {
  y[threadIdx.x] = undeclared_identifier;
}
)";

// A manifest over the files WriteTestKernelFiles writes: saxpy (any arch) and scale (8.0+).
inline constexpr char kTestManifest[] = R"(version: 1
kernels:
  - name: saxpy
    source: saxpy.cu
  - name: scale
    source: scale.cu
    headers: [scale.cuh]
    name_expressions: ["scale<float>"]
    min_arch: 8.0
)";

// Writes the kernels above into `dir` as saxpy.cu, scale.cu + scale.cuh and broken.cu, for
// tests that write a manifest naming them.
inline void WriteTestKernelFiles(const TempDir& dir) {
  dir.Write("saxpy.cu", kSaxpySource);
  dir.Write("scale.cu", kScaleTemplateSource);
  dir.Write("scale.cuh", kScaleHeader);
  dir.Write("broken.cu", kSyntaxErrorSource);
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_KERNELS_H_
