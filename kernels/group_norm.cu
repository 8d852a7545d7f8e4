// GroupNorm over NCHW fp16 with fp32 statistics (two-pass mean/variance), optional fused SiLU.
//   x, y: [N, C, HW]; gamma, beta: [C]; C % G == 0.
//   y = (x - mean_g) * rsqrt(var_g + eps) * gamma[c] + beta[c]; then y * sigmoid(y) if apply_silu.
//   var is the biased (population) variance, as in torch.nn.GroupNorm. (C / G) * HW < 2^31.
// Launch: grid = N * G (one block per group), block = 512.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(512)
    group_norm_f16(const __half* __restrict__ x, const __half* __restrict__ gamma,
                   const __half* __restrict__ beta, __half* __restrict__ y, int N, int C, int HW,
                   int G, float eps, int apply_silu) {
  __shared__ float scratch[32];
  const int ng = blockIdx.x;
  if (ng >= N * G) return;
  const int n = ng / G, g = ng - n * G;
  const int cpg = C / G;
  const int count = cpg * HW;  // elements per group (< 2^31)
  const long long base = (static_cast<long long>(n) * C + static_cast<long long>(g) * cpg) * HW;
  const __half* xg = x + base;
  __half* yg = y + base;
  // Pairs never straddle a channel when HW is even (base is then even too).
  const bool vec = (HW % 2) == 0;

  float sum = 0.f;
  if (vec) {
    const __half2* x2 = reinterpret_cast<const __half2*>(xg);
    for (int i = threadIdx.x; i < count / 2; i += blockDim.x) {
      const float2 v = __half22float2(x2[i]);
      sum += v.x + v.y;
    }
  } else {
    for (int i = threadIdx.x; i < count; i += blockDim.x) sum += __half2float(xg[i]);
  }
  const float mean = kcache_k::block_sum(sum, scratch) / static_cast<float>(count);

  float sq = 0.f;
  if (vec) {
    const __half2* x2 = reinterpret_cast<const __half2*>(xg);
    for (int i = threadIdx.x; i < count / 2; i += blockDim.x) {
      const float2 v = __half22float2(x2[i]);
      const float a = v.x - mean, b = v.y - mean;
      sq += a * a + b * b;
    }
  } else {
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      const float a = __half2float(xg[i]) - mean;
      sq += a * a;
    }
  }
  const float var = kcache_k::block_sum(sq, scratch) / static_cast<float>(count);
  const float rstd = rsqrtf(var + eps);

  const int c0 = g * cpg;
  if (vec) {
    const __half2* x2 = reinterpret_cast<const __half2*>(xg);
    __half2* y2 = reinterpret_cast<__half2*>(yg);
    for (int i = threadIdx.x; i < count / 2; i += blockDim.x) {
      const int c = c0 + (2 * i) / HW;
      const float ga = __half2float(gamma[c]) * rstd, be = __half2float(beta[c]);
      const float2 v = __half22float2(x2[i]);
      float a = (v.x - mean) * ga + be, b = (v.y - mean) * ga + be;
      if (apply_silu) {
        a = a / (1.f + expf(-a));
        b = b / (1.f + expf(-b));
      }
      y2[i] = __floats2half2_rn(a, b);
    }
  } else {
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      const int c = c0 + i / HW;
      float a = (__half2float(xg[i]) - mean) * (__half2float(gamma[c]) * rstd) +
                __half2float(beta[c]);
      if (apply_silu) a = a / (1.f + expf(-a));
      yg[i] = __float2half_rn(a);
    }
  }
}
