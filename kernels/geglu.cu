// Fused GEGLU (diffusers GEGLU after the projection): in = [x | gate] along the last dim.
//   in: [rows, 2*d] fp16, out: [rows, d] fp16, out = x * gelu(gate), fp32 math.
//   gelu is the exact erf form; -DKCACHE_GELU_TANH=1 selects the tanh approximation.
// Launch: block = 256, any grid (grid-stride); ceil(rows*d / 2048) blocks covers one pass.
// Pointers must be 16-byte aligned for the vector path (taken when d % 8 == 0).
#include "common.cuh"

#ifndef KCACHE_GELU_TANH
#define KCACHE_GELU_TANH 0
#endif

__device__ __forceinline__ float gelu(float g) {
#if KCACHE_GELU_TANH
  const float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);
  return 0.5f * g * (1.f + tanhf(u));
#else
  return 0.5f * g * (1.f + erff(g * 0.7071067811865476f));
#endif
}

__device__ __forceinline__ __half2 geglu2(__half2 x, __half2 g) {
  const float2 xf = __half22float2(x), gf = __half22float2(g);
  return __floats2half2_rn(xf.x * gelu(gf.x), xf.y * gelu(gf.y));
}

extern "C" __global__ void __launch_bounds__(256)
    geglu_f16(const __half* __restrict__ in, __half* __restrict__ out, int rows, int d) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d % 8 == 0) {
    // 8 elements per thread per step: one 16-byte load of x, one of gate, one store.
    const int vd = d / 8;
    const long long total = static_cast<long long>(rows) * vd;
    for (long long i = first; i < total; i += stride) {
      const long long r = i / vd;
      const long long c = (i - r * vd) * 8;
      const uint4 xv = *reinterpret_cast<const uint4*>(in + r * 2 * d + c);
      const uint4 gv = *reinterpret_cast<const uint4*>(in + r * 2 * d + d + c);
      const __half2* x2 = reinterpret_cast<const __half2*>(&xv);
      const __half2* g2 = reinterpret_cast<const __half2*>(&gv);
      uint4 ov;
      __half2* o2 = reinterpret_cast<__half2*>(&ov);
#pragma unroll
      for (int k = 0; k < 4; ++k) o2[k] = geglu2(x2[k], g2[k]);
      *reinterpret_cast<uint4*>(out + r * d + c) = ov;
    }
  } else {
    const long long total = static_cast<long long>(rows) * d;
    for (long long i = first; i < total; i += stride) {
      const long long r = i / d;
      const long long c = i - r * d;
      const float x = __half2float(in[r * 2 * d + c]);
      const float g = __half2float(in[r * 2 * d + d + c]);
      out[i] = __float2half_rn(x * gelu(g));
    }
  }
}
