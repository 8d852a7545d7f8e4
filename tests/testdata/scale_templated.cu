// A templated kernel in an anonymous namespace: its lowered (mangled) names carry a
// per-compile random component unless -frandom-seed is fixed, so it tests determinism.
// Lower with name expressions such as "scale<float>" and "scale<double>".
#include "scale_op.h"

namespace {

template <typename T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = kcache_test::Apply(data[i], factor);
}

}  // namespace
