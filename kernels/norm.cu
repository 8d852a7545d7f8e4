// Row normalisations with fp32 statistics. x, y: [rows, cols]; weights: [cols].
//   rms_norm:   y = x * rsqrt(mean(x^2) + eps) * w
//   layer_norm: y = (x - mean) * rsqrt(var + eps) * gamma + beta   (biased variance, two-pass)
// Launch: grid = rows (grid-stride over rows), block = 256.
#include "common.cuh"

template <typename T>
__global__ void __launch_bounds__(256)
    rms_norm(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int rows,
             int cols, float eps) {
  __shared__ float scratch[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + static_cast<long long>(row) * cols;
    T* yr = y + static_cast<long long>(row) * cols;
    float sq = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = kcache_k::to_float(xr[c]);
      sq += v * v;
    }
    const float ms = kcache_k::block_sum(sq, scratch) / static_cast<float>(cols);
    const float rstd = rsqrtf(ms + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      yr[c] = kcache_k::from_float<T>(kcache_k::to_float(xr[c]) * rstd * kcache_k::to_float(w[c]));
  }
}

template <typename T>
__global__ void __launch_bounds__(256)
    layer_norm(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
               T* __restrict__ y, int rows, int cols, float eps) {
  __shared__ float scratch[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + static_cast<long long>(row) * cols;
    T* yr = y + static_cast<long long>(row) * cols;
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += kcache_k::to_float(xr[c]);
    const float mean = kcache_k::block_sum(sum, scratch) / static_cast<float>(cols);
    float sq = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = kcache_k::to_float(xr[c]) - mean;
      sq += d * d;
    }
    const float rstd = rsqrtf(kcache_k::block_sum(sq, scratch) / static_cast<float>(cols) + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = kcache_k::to_float(xr[c]) - mean;
      yr[c] = kcache_k::from_float<T>(d * rstd * kcache_k::to_float(gamma[c]) +
                                      kcache_k::to_float(beta[c]));
    }
  }
}
