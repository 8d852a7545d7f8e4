// FP8 E4M3 (OCP "e4m3fn": max 448, no inf) with a per-tensor scale, SM 8.9+ (hardware cvt).
//   fp8_amax_f16:          amax[0] = max(amax[0], max_i |x[i]|); amax must start at 0 (NaN ignored)
//   fp8_quantize_e4m3_f16: q[i] = e4m3_rn_satfinite(x[i] * (1 / scale[0]))  (scale = amax / 448)
//   fp8_dequantize_e4m3_f16: y[i] = fp16(e4m3(q[i]) * scale[0])
//   fp8_gemv_e4m3:         y[n] = fp16(w_scale[0] * sum_k e4m3(w[n, k]) * x[k]), fp32 accumulation
// Element-wise kernels: block = 256, any grid (grid-stride), pointers 4-byte aligned.
// GEMV: block = 256 (8 warps, one output row per warp), grid = ceil(N / 8); the 16-byte vector
// path is taken when K % 16 == 0 and w, x are 16-byte aligned.
#include <cuda_fp8.h>

#include "common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "fp8_e4m3 kernels need sm_89 or newer (cvt.rn.satfinite.e4m3x2)"
#endif

namespace {
__device__ __forceinline__ float2 e4m3x2_to_float2(__nv_fp8x2_storage_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(v, __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}
}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    fp8_amax_f16(const __half* __restrict__ x, float* __restrict__ amax, int n) {
  __shared__ float scratch[32];
  const int stride = gridDim.x * blockDim.x;
  float m = 0.f;
  const __half2* x2 = reinterpret_cast<const __half2*>(x);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += stride) {
    const float2 f = __half22float2(x2[i]);
    m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
  if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) m = fmaxf(m, fabsf(__half2float(x[n - 1])));
  m = kcache_k::block_max(m, scratch);
  // Non-negative floats order like their bit patterns as signed ints.
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

extern "C" __global__ void __launch_bounds__(256)
    fp8_quantize_e4m3_f16(const __half* __restrict__ x, __nv_fp8_storage_t* __restrict__ q,
                          const float* __restrict__ scale, int n) {
  const float inv = 1.f / scale[0];
  const int stride = gridDim.x * blockDim.x;
  const __half2* x2 = reinterpret_cast<const __half2*>(x);
  __nv_fp8x2_storage_t* q2 = reinterpret_cast<__nv_fp8x2_storage_t*>(q);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += stride) {
    const float2 f = __half22float2(x2[i]);
    q2[i] = __nv_cvt_float2_to_fp8x2(make_float2(f.x * inv, f.y * inv), __NV_SATFINITE, __NV_E4M3);
  }
  if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0)
    q[n - 1] = __nv_cvt_float_to_fp8(__half2float(x[n - 1]) * inv, __NV_SATFINITE, __NV_E4M3);
}

extern "C" __global__ void __launch_bounds__(256)
    fp8_dequantize_e4m3_f16(const __nv_fp8_storage_t* __restrict__ q, __half* __restrict__ y,
                            const float* __restrict__ scale, int n) {
  const float s = scale[0];
  const int stride = gridDim.x * blockDim.x;
  const __nv_fp8x2_storage_t* q2 = reinterpret_cast<const __nv_fp8x2_storage_t*>(q);
  __half2* y2 = reinterpret_cast<__half2*>(y);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += stride) {
    const float2 f = e4m3x2_to_float2(q2[i]);
    y2[i] = __floats2half2_rn(f.x * s, f.y * s);
  }
  if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) {
    const float2 f = e4m3x2_to_float2(static_cast<__nv_fp8x2_storage_t>(q[n - 1]));
    y[n - 1] = __float2half_rn(f.x * s);
  }
}

extern "C" __global__ void __launch_bounds__(256)
    fp8_gemv_e4m3(const __nv_fp8_storage_t* __restrict__ w, const __half* __restrict__ x,
                  __half* __restrict__ y, const float* __restrict__ w_scale, int N, int K) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= N) return;  // whole warp exits together
  const __nv_fp8_storage_t* wr = w + static_cast<long long>(row) * K;
  float acc = 0.f;
  const bool vec = (K % 16) == 0 && (reinterpret_cast<unsigned long long>(w) & 15) == 0 &&
                   (reinterpret_cast<unsigned long long>(x) & 15) == 0;
  if (vec) {
    for (int k = lane * 16; k < K; k += 32 * 16) {
      const uint4 wv = *reinterpret_cast<const uint4*>(wr + k);
      const uint4 xa = *reinterpret_cast<const uint4*>(x + k);
      const uint4 xb = *reinterpret_cast<const uint4*>(x + k + 8);
      const __nv_fp8x2_storage_t* w2 = reinterpret_cast<const __nv_fp8x2_storage_t*>(&wv);
      const __half2* xa2 = reinterpret_cast<const __half2*>(&xa);
      const __half2* xb2 = reinterpret_cast<const __half2*>(&xb);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 wf = e4m3x2_to_float2(w2[e]);
        const float2 xf = __half22float2(xa2[e]);
        acc = fmaf(wf.x, xf.x, acc);
        acc = fmaf(wf.y, xf.y, acc);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 wf = e4m3x2_to_float2(w2[4 + e]);
        const float2 xf = __half22float2(xb2[e]);
        acc = fmaf(wf.x, xf.x, acc);
        acc = fmaf(wf.y, xf.y, acc);
      }
    }
  } else {
    for (int k = lane; k < K; k += 32) {
      const float2 wf = e4m3x2_to_float2(static_cast<__nv_fp8x2_storage_t>(wr[k]));
      acc = fmaf(wf.x, __half2float(x[k]), acc);
    }
  }
  acc = kcache_k::warp_sum(acc);
  if (lane == 0) y[row] = __float2half_rn(acc * w_scale[0]);
}
